//! The recorded graph: nodes ([`Operation`](crate::Operation), `Node`, saved inputs and their
//! version snapshots, `op`), node and tensor identities (`ids`), the version bumps of in-place
//! mutation (`mutation`), the wanted-gradient mask (`needs_grad`) and the `Captured` promise that
//! a plain value an op takes holds no tensor (`captured`).

pub(crate) mod captured;
pub(crate) mod ids;
pub(crate) mod mutation;
pub(crate) mod needs_grad;
pub(crate) mod op;
pub(crate) mod recording;
pub(crate) mod saved;
pub(crate) mod vjp_call;
