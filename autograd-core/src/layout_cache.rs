//! Compact row-major layouts interned per thread for the life of the process, and the one-word
//! copy of a result's layout that a recorded node keeps.
//!
//! A training loop's tensors have a handful of shapes, and elementwise results share their
//! input's layout, so most nodes keep an interned layout. Keeping one by address instead of by
//! a counted `Arc` saves the two atomic read-modify-writes a node's layout would cost (the
//! clone at recording and the drop at release), which on a small tensor are a visible part
//! of a node's whole cost.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::Result;
use crate::int_tuple::Shape;
use crate::layout::Layout;

/// How many shapes a thread interns; further shapes get ordinary layouts, so a program that
/// makes ever-new shapes keeps at most this many (a few hundred bytes each) per thread.
const MAX_SHAPES: usize = 256;

thread_local! {
    static INTERNED: RefCell<HashMap<Shape, &'static Arc<Layout>>> = RefCell::new(HashMap::new());
}

/// The compact row-major layout of `shape`: the thread's interned one when it has it or room
/// for it, else a fresh one. Fails as [`Layout::compact_row_major`] does.
pub(crate) fn compact(shape: Shape) -> Result<Arc<Layout>> {
    let known = INTERNED
        .try_with(|m| m.try_borrow().ok()?.get(&shape).map(|l| Arc::clone(l)))
        .ok()
        .flatten();
    if let Some(layout) = known {
        return Ok(layout);
    }
    let layout = Layout::compact_row_major(shape.clone())?;
    let interned = INTERNED
        .try_with(|m| {
            let mut m = m.try_borrow_mut().ok()?;
            if m.len() >= MAX_SHAPES {
                return None;
            }
            let mut kept = layout.clone();
            kept.make_immortal();
            // the leaked reference keeps the layout alive for the rest of the process
            let kept: &'static Arc<Layout> = Box::leak(Box::new(Arc::new(kept)));
            m.insert(shape, kept);
            Some(Arc::clone(kept))
        })
        .ok()
        .flatten();
    Ok(interned.unwrap_or_else(|| Arc::new(layout)))
}

/// A node's copy of its result's layout, one word wide: an interned layout by address (no
/// reference count touched), any other through the `Arc` count it holds.
pub struct KeptLayout(NonNull<Layout>);

// SAFETY: it stands for a `&'static Layout` or an `Arc<Layout>`, both `Send + Sync`.
unsafe impl Send for KeptLayout {}
// SAFETY: as above.
unsafe impl Sync for KeptLayout {}

impl KeptLayout {
    /// Keeps `layout`.
    pub fn of(layout: &Arc<Layout>) -> KeptLayout {
        if layout.is_immortal() {
            return KeptLayout(NonNull::from(&**layout));
        }
        let raw = Arc::into_raw(Arc::clone(layout)).cast_mut();
        // SAFETY: `Arc::into_raw` never returns null.
        KeptLayout(unsafe { NonNull::new_unchecked(raw) })
    }
}

impl Deref for KeptLayout {
    type Target = Layout;
    fn deref(&self) -> &Layout {
        // SAFETY: an interned layout is never freed, and any other is kept alive by the count
        // this value holds.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for KeptLayout {
    fn drop(&mut self) {
        if !self.is_immortal() {
            // SAFETY: a layout that is not interned came from `Arc::into_raw` in `of`, and
            // this value owns the count it took.
            drop(unsafe { Arc::from_raw(self.0.as_ptr().cast_const()) });
        }
    }
}

impl fmt::Debug for KeptLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread hands out one layout per shape, which a node keeps without counting it; an
    /// ordinary layout is kept by its count, given back when the copy goes.
    #[test]
    fn interned_layouts_are_shared_and_kept_uncounted() {
        let a = compact(Shape::from(&[2usize, 3][..])).unwrap();
        let b = compact(Shape::from(&[2usize, 3][..])).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(a.is_immortal());
        assert_eq!(*a, Layout::row_major(&[2, 3]).unwrap());
        let count = Arc::strong_count(&a);
        let kept = KeptLayout::of(&a);
        assert_eq!(
            Arc::strong_count(&a),
            count,
            "an interned layout is kept by address"
        );
        assert_eq!(kept.shape(), a.shape());
        drop(kept);
        assert_eq!(Arc::strong_count(&a), count);

        let plain = Arc::new(Layout::row_major(&[4]).unwrap());
        assert!(!plain.is_immortal());
        let kept = KeptLayout::of(&plain);
        assert_eq!(Arc::strong_count(&plain), 2);
        assert_eq!(kept.size(), 4);
        drop(kept);
        assert_eq!(Arc::strong_count(&plain), 1);
    }

    /// A clone of an interned layout is an ordinary one (a node keeps it by its count), and a
    /// thread past its bound gets ordinary layouts, equal to the interned kind.
    #[test]
    fn clones_and_layouts_past_the_bound_are_ordinary() {
        let a = compact(Shape::from(&[5usize][..])).unwrap();
        let copy = Arc::new((*a).clone());
        assert!(!copy.is_immortal());
        assert_eq!(*copy, *a);
        std::thread::spawn(|| {
            for n in 0..MAX_SHAPES + 3 {
                let l = compact(Shape::from(&[n + 1, 7][..])).unwrap();
                assert_eq!(l.is_immortal(), n < MAX_SHAPES, "shape {n}");
                assert_eq!(*l, Layout::row_major(&[n + 1, 7]).unwrap());
            }
        })
        .join()
        .unwrap();
    }

    /// An invalid shape is the same error as `Layout::compact_row_major`'s, and interns nothing.
    #[test]
    fn an_overflowing_shape_is_an_error() {
        let huge = Shape::from(&[usize::MAX, 2][..]);
        let err = compact(huge.clone()).unwrap_err();
        assert_eq!(
            err.to_string(),
            Layout::compact_row_major(huge).unwrap_err().to_string()
        );
    }
}
