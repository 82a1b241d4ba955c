//! Compact row-major layouts interned per thread for the life of the process, and the one-word
//! handle through which tensors and recorded nodes keep a layout.
//!
//! A training loop's tensors have a handful of shapes, and elementwise results share their
//! input's layout, so most tensors and nodes keep an interned layout. Keeping one by address
//! instead of by a counted `Arc` saves the two atomic read-modify-writes each holder would
//! cost (the clone when a result or node is made, the drop at release), which on a small
//! tensor are a visible part of a node's whole cost.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::Result;
use crate::layout::int_tuple::Shape;
use crate::layout::Layout;

/// How many shapes a thread interns; further shapes get ordinary layouts, so a program that
/// makes ever-new shapes keeps at most this many (a few hundred bytes each) per thread.
const MAX_SHAPES: usize = 256;

thread_local! {
    /// Each interned layout as `Arc::into_raw` gave it; the count it took is never given back.
    static INTERNED: RefCell<HashMap<Shape, NonNull<Layout>>> = RefCell::new(HashMap::new());
}

/// The compact row-major layout of `shape`: the thread's interned one when it has it or room
/// for it, else a fresh one. Fails as [`Layout::compact_row_major`] does.
pub(crate) fn compact(shape: Shape) -> Result<KeptLayout> {
    let (known, room) = INTERNED
        .try_with(|m| {
            m.try_borrow().map_or((None, false), |m| {
                (m.get(&shape).copied(), m.len() < MAX_SHAPES)
            })
        })
        .unwrap_or((None, false));
    if let Some(p) = known {
        return Ok(KeptLayout(p));
    }
    if !room {
        return Ok(KeptLayout::from(Arc::new(Layout::compact_row_major(
            shape,
        )?)));
    }
    let mut layout = Layout::compact_row_major(shape.clone())?;
    layout.make_immortal();
    // the count `into_raw` keeps is never given back: the layout lives for the rest of the
    // process
    let raw = Arc::into_raw(Arc::new(layout)).cast_mut();
    // SAFETY: `Arc::into_raw` never returns null.
    let p = unsafe { NonNull::new_unchecked(raw) };
    let _ = INTERNED.try_with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            m.insert(shape, p);
        }
    });
    Ok(KeptLayout(p))
}

/// A layout as a tensor or a node keeps it, one word wide: an interned layout by address,
/// copied and dropped without touching a reference count, any other through the `Arc` count
/// it holds. Always a pointer `Arc::into_raw` gave.
pub struct KeptLayout(NonNull<Layout>);

// SAFETY: it stands for a `&'static Layout` or an `Arc<Layout>`, both `Send + Sync`.
unsafe impl Send for KeptLayout {}
// SAFETY: as above.
unsafe impl Sync for KeptLayout {}

impl KeptLayout {
    /// The layout as an `Arc`.
    pub fn to_arc(&self) -> Arc<Layout> {
        let p = self.0.as_ptr().cast_const();
        // SAFETY: `p` came from `Arc::into_raw`, and the count this value holds (or the one
        // an interned layout never gives back) keeps it valid; the new count is the result's.
        unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        }
    }
}

/// Keeps an `Arc`'s layout: by its count, or by address when it is interned (the count the
/// `Arc` held is then given back).
impl From<Arc<Layout>> for KeptLayout {
    fn from(layout: Arc<Layout>) -> KeptLayout {
        let raw = Arc::into_raw(layout).cast_mut();
        // SAFETY: `Arc::into_raw` never returns null.
        let kept = KeptLayout(unsafe { NonNull::new_unchecked(raw) });
        if kept.is_immortal() {
            // SAFETY: the count `layout` held, given back; the interner's keeps it alive.
            unsafe { Arc::decrement_strong_count(raw.cast_const()) };
        }
        kept
    }
}

impl Clone for KeptLayout {
    fn clone(&self) -> KeptLayout {
        if !self.is_immortal() {
            // SAFETY: the pointer came from `Arc::into_raw` and this value's count keeps it
            // alive; the clone owns the new count.
            unsafe { Arc::increment_strong_count(self.0.as_ptr().cast_const()) };
        }
        KeptLayout(self.0)
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
            // SAFETY: a layout that is not interned came from `Arc::into_raw`, and this value
            // owns a count of it.
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

    /// A thread hands out one layout per shape, copied without counting; an ordinary layout
    /// is kept by its count, given back when the copy goes.
    #[test]
    fn interned_layouts_are_shared_and_kept_uncounted() {
        let a = compact(Shape::from(&[2usize, 3][..])).unwrap();
        let b = compact(Shape::from(&[2usize, 3][..])).unwrap();
        assert!(Arc::ptr_eq(&a.to_arc(), &b.to_arc()));
        assert!(a.is_immortal());
        assert_eq!(*a, Layout::row_major(&[2, 3]).unwrap());
        let arc = a.to_arc();
        let count = Arc::strong_count(&arc);
        let copies: Vec<KeptLayout> = (0..3).map(|_| a.clone()).collect();
        let from_arc = KeptLayout::from(Arc::clone(&arc));
        assert_eq!(
            Arc::strong_count(&arc),
            count,
            "interned copies hold no count"
        );
        assert_eq!(from_arc.shape(), a.shape());
        drop((copies, from_arc));
        assert_eq!(Arc::strong_count(&arc), count);

        let plain = Arc::new(Layout::row_major(&[4]).unwrap());
        assert!(!plain.is_immortal());
        let kept = KeptLayout::from(Arc::clone(&plain));
        let copy = kept.clone();
        assert_eq!(Arc::strong_count(&plain), 3);
        assert!(Arc::ptr_eq(&copy.to_arc(), &plain));
        assert_eq!(kept.size(), 4);
        drop((kept, copy));
        assert_eq!(Arc::strong_count(&plain), 1);
    }

    /// A clone of an interned layout is an ordinary one (kept by its count), and a thread past
    /// its bound gets ordinary layouts, equal to the interned kind.
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

    /// A tensor outlives the thread that interned its layout: the layout is not the thread's
    /// to free, and the tensor's values, views and gradient still work elsewhere.
    #[test]
    fn an_interned_layout_outlives_its_thread() {
        let t = std::thread::spawn(|| {
            crate::Tensor::from_vec(
                vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
                Shape::from(&[3usize, 2][..]),
            )
            .unwrap()
        })
        .join()
        .unwrap();
        assert!(t.layout().is_immortal());
        assert_eq!(*t.layout(), Layout::row_major(&[3, 2]).unwrap());
        let y = crate::ops::mul_scalar(&t, 2.0).unwrap();
        assert_eq!(y.values::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
        crate::ops::sum(&y).unwrap().backward().unwrap();
        assert_eq!(
            t.grad().unwrap().unwrap().values::<f32>().unwrap(),
            [2.0; 6]
        );
        assert_eq!(t.transpose(0, 1).unwrap().dims(), [2, 3]);
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
