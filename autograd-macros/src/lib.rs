//! The `#[differentiable]` attribute (see the macro issue); this crate is a placeholder until
//! the macro lands, so the workspace layout is final from the start.
