//! Fallible allocation of buffers whose size comes from user input: a huge broadcast view read
//! out in full, an empty tensor with a 2^40 extent, a row of a broadcast operand. Every such
//! buffer goes through these functions, so an unallocatable size is `Error::Value` instead of
//! the process aborting with "memory allocation failed". Public as [`crate::kernel::alloc`].

use crate::error::{Error, Result};

/// An empty vector with room for `n` elements, or `Error::Value` when that much memory cannot
/// be had.
pub fn with_capacity<T>(n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    reserve(&mut v, n)?;
    Ok(v)
}

/// `n` copies of `value` (the fallible `vec![value; n]`).
pub fn filled<T: Clone>(n: usize, value: T) -> Result<Vec<T>> {
    let mut v = with_capacity(n)?;
    v.resize(n, value);
    Ok(v)
}

/// Resizes `v` to `n` elements, new ones `value` (the fallible `Vec::resize`); on error `v` is
/// unchanged.
pub fn resize<T: Clone>(v: &mut Vec<T>, n: usize, value: T) -> Result<()> {
    reserve(v, n.saturating_sub(v.len()))?;
    v.resize(n, value);
    Ok(())
}

/// Room for `extra` more elements in `v`.
fn reserve<T>(v: &mut Vec<T>, extra: usize) -> Result<()> {
    v.try_reserve_exact(extra).map_err(|_| {
        Error::Value(format!(
            "cannot allocate {} elements of {} bytes",
            v.len().saturating_add(extra),
            std::mem::size_of::<T>()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{filled, resize, with_capacity};
    use crate::error::ErrorKind;

    #[test]
    fn an_unallocatable_size_is_a_value_error_not_an_abort() {
        let huge = 1usize << 60;
        let e = with_capacity::<f32>(huge).expect_err("2^60 floats");
        assert_eq!(e.kind(), ErrorKind::Value);
        assert!(e.to_string().contains("cannot allocate"), "{e}");
        assert_eq!(
            filled(huge, 0u8).expect_err("2^60 bytes").kind(),
            ErrorKind::Value
        );
        let mut v = vec![1.0f32, 2.0];
        assert_eq!(
            resize(&mut v, huge, 0.0).expect_err("grow").kind(),
            ErrorKind::Value
        );
        assert_eq!(v, [1.0, 2.0], "a failed resize leaves the vector as it was");
    }

    #[test]
    fn allocatable_sizes_give_the_values_asked_for() {
        assert_eq!(filled(3, 7i32).expect("3 ints"), [7, 7, 7]);
        let mut v = vec![1.0f64];
        resize(&mut v, 3, 0.5).expect("grow");
        assert_eq!(v, [1.0, 0.5, 0.5]);
        resize(&mut v, 1, 9.0).expect("shrink");
        assert_eq!(v, [1.0]);
        assert!(with_capacity::<u64>(5).expect("room").capacity() >= 5);
    }
}
