//! Aliasing: whether a layout's distinct coordinates share storage slots, decided exactly (a
//! sufficient mixed-radix test first, then enumeration where the span allows) when a layout is
//! built (or one of its modes taken), so every later query is a field read.

use crate::error::{ensure, Result};
use crate::layout::int_tuple::IntTuple;
use crate::layout::{extent_product, Leaf};

/// How a layout maps distinct logical coordinates onto storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aliasing {
    /// Injective: every coordinate has its own storage slot.
    None,
    /// Collisions that vanish once the stride-0 modes are removed.
    Broadcast,
    /// Any other collision.
    Other,
}

/// Checks that the aliasing of every nested mode (every tuple node below the root) can be
/// decided, so that [`Layout::mode`](crate::Layout::mode) never fails on a valid layout. `next` counts leaves.
pub(super) fn check_nested_modes(
    node: &IntTuple,
    leaves: &[Leaf],
    next: &mut usize,
    root: bool,
) -> Result<()> {
    match node {
        // a leaf: one mode is always decided
        IntTuple::Int(_) => {
            *next += 1;
            Ok(())
        }
        // a tuple: its own leaves, then each child
        IntTuple::Tuple(children) => {
            let start = *next;
            for c in children {
                check_nested_modes(c, leaves, next, false)?;
            }
            if !root {
                let own = &leaves[start..*next];
                classify(own, extent_product(own))?;
            }
            Ok(())
        }
    }
}

/// Exact aliasing classification of leaves.
pub(super) fn classify(leaves: &[Leaf], size: usize) -> Result<Aliasing> {
    if size == 0 {
        return Ok(Aliasing::None);
    }
    let live: Vec<Leaf> = leaves.iter().copied().filter(|l| l.extent > 1).collect();
    let (zero, nonzero): (Vec<Leaf>, Vec<Leaf>) = live.into_iter().partition(|l| l.stride == 0);
    let rest_injective = injective(&nonzero)?;
    Ok(match (zero.is_empty(), rest_injective) {
        (true, true) => Aliasing::None,
        (false, true) => Aliasing::Broadcast,
        (_, false) => Aliasing::Other,
    })
}

/// Offsets the exact fallback may enumerate: a bitmap of this many bits is 128 MiB.
const MAX_BITMAP_SPAN: usize = 1 << 30;
/// Offsets the exact fallback may sort when the span is too wide for a bitmap.
const MAX_SORTED_OFFSETS: usize = 1 << 24;

/// Exact injectivity of leaves that all have extent > 1 and stride > 0.
fn injective(leaves: &[Leaf]) -> Result<bool> {
    let mut sorted = leaves.to_vec();
    sorted.sort_by_key(|l| l.stride);
    // Sufficient: every stride clears the span of all smaller-stride modes (mixed radix).
    let mut span = 1usize;
    let mut nested = true;
    for l in &sorted {
        if l.stride < span {
            nested = false;
        }
        span += l.stride * (l.extent - 1);
    }
    if nested {
        return Ok(true);
    }
    let size: usize = sorted.iter().map(|l| l.extent).product();
    if size > span {
        return Ok(false); // pigeonhole: more coordinates than offsets they can reach
    }
    // Exact fallback (deciding injectivity is a subset-sum problem in general): enumerate the
    // offsets, into a bitmap when the span allows, else sorted, stopping at a collision.
    if span <= MAX_BITMAP_SPAN {
        let mut seen = vec![0u64; span.div_ceil(64)];
        return Ok(for_each_until(&sorted, |off| {
            let (w, b) = (off / 64, off % 64);
            let hit = seen[w] & (1 << b) != 0;
            seen[w] |= 1 << b;
            hit
        }));
    }
    ensure!(
        size <= MAX_SORTED_OFFSETS,
        NotImplemented,
        "deciding whether a layout with {size} interleaved coordinates over a span of {span} is injective needs enumerating them; split it into smaller layouts"
    );
    let mut offsets = Vec::with_capacity(size);
    for_each_until(&sorted, |off| {
        offsets.push(off);
        false
    });
    offsets.sort_unstable();
    Ok(offsets.windows(2).all(|w| w[0] != w[1]))
}

/// Calls `f` with every offset of `leaves` until it returns true; returns whether it never did.
fn for_each_until(leaves: &[Leaf], mut f: impl FnMut(usize) -> bool) -> bool {
    let mut counter = vec![0usize; leaves.len()];
    let mut off = 0usize;
    loop {
        if f(off) {
            return false;
        }
        let mut k = 0;
        loop {
            if k == leaves.len() {
                return true;
            }
            counter[k] += 1;
            off += leaves[k].stride;
            if counter[k] < leaves[k].extent {
                break;
            }
            off -= leaves[k].stride * leaves[k].extent;
            counter[k] = 0;
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::int_tuple::{Shape, Stride};
    use crate::layout::{Aliasing, Layout};
    use crate::{shape, stride};

    fn l(s: Shape, d: Stride) -> Layout {
        Layout::new(s, d).unwrap()
    }

    #[test]
    fn injectivity_is_exact() {
        assert!(l(shape![3, 2], stride![2, 3]).is_injective());
        assert_eq!(l(shape![2, 2], stride![1, 1]).aliasing(), Aliasing::Other);
        assert_eq!(
            l(shape![4, 2], stride![0, 1]).aliasing(),
            Aliasing::Broadcast
        );
        assert_eq!(l(shape![4, 2], stride![1, 1]).aliasing(), Aliasing::Other);
        assert_eq!(
            l(shape![2, [4, 3]], stride![1, [0, 2]]).aliasing(),
            Aliasing::Broadcast
        );
        assert!(l(shape![1, 5], stride![0, 1]).is_injective());
        assert!(l(shape![0, 5], stride![0, 0]).is_injective());
    }

    #[test]
    fn wide_spans_are_classified_without_a_huge_bitmap() {
        let wide = l(shape![3, 2], stride![2i64 << 58, 3i64 << 58]);
        assert!(wide.is_injective());
        assert_eq!(
            l(shape![2, 2], stride![1i64 << 58, 1i64 << 58]).aliasing(),
            Aliasing::Other
        );
        // too many interleaved coordinates over too wide a span to enumerate
        let err = Layout::new(
            shape![1 << 13, 1 << 13],
            stride![1i64 << 36, (1i64 << 36) + 1],
        );
        assert_eq!(err.unwrap_err().kind(), crate::ErrorKind::NotImplemented);
    }
}
