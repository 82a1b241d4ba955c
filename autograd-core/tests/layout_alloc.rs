//! `Layout::new` formats its trees only to build an error: a valid layout costs the same
//! allocations whatever the digits of its extents and strides. (A global allocator counts the
//! bytes each thread allocates, so this file holds this one check.)

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;

use autograd_core::{IntTuple, Layout, Shape, Stride};

struct Counting;

thread_local! {
    static BYTES: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// thread-local `Cell` with a const initializer, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        let _ = BYTES.try_with(|b| b.set(b.get() + layout.size()));
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        let _ = BYTES.try_with(|b| b.set(b.get() + new_size));
        // SAFETY: the caller's contract for `realloc` is passed on as it is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes allocated on this thread by building (and dropping) the layout.
fn bytes_for(shape: &Shape, stride: &Stride) -> usize {
    let (shape, stride) = (shape.clone(), stride.clone());
    let before = BYTES.with(Cell::get);
    let l = Layout::new(shape, stride).expect("a valid layout");
    drop(l);
    BYTES.with(Cell::get) - before
}

#[test]
fn a_valid_layout_allocates_the_same_whatever_its_digits() {
    // 24 extent-1 leaves: strides of 1 digit print as ~100 characters, of 19 digits as ~500
    let ones = vec![1i64; 24];
    let shape = Shape(IntTuple::from(ones.clone()));
    let short = Stride(IntTuple::from(ones));
    let long = Stride(IntTuple::from(vec![i64::MAX - 1; 24]));
    let a = bytes_for(&shape, &short);
    let b = bytes_for(&shape, &long);
    assert_eq!(
        a, b,
        "Layout::new allocated {a} bytes for short strides, {b} for long ones"
    );
}
