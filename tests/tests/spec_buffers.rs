//! Requirement: Gradient buffers use injective layouts and aggregate broadcast aliases.
#![allow(non_snake_case)]

mod spec_support;

use autograd_core::{grad, shape, stride, GradOptions, Layout, Shape, Stride, Tensor};
use autograd_ops::{mul, mul_scalar};
use autograd_tests::t;
use spec_support::{on_cpu, on_test_carrier, tc, v, with_layout};

/// Per-slot sums of `contributions` (logical order) over `layout`, placed at every position.
fn folded(layout: &Layout, contributions: &[f32]) -> Vec<f32> {
    let slots = layout.try_offsets().unwrap();
    let mut sums = vec![0.0f32; layout.cosize()];
    for (c, &s) in contributions.iter().zip(&slots) {
        sums[s] += c;
    }
    slots.iter().map(|&s| sums[s]).collect()
}

/// `x * w` differentiated with a ones cotangent: returns x.grad.
fn grad_of_product(x: &Tensor, w: &Tensor) -> Tensor {
    let y = mul(x, w).unwrap();
    let ones = y.f32_full_like(1.0).unwrap();
    y.backward_with(Some(&ones), false).unwrap();
    x.grad().unwrap().unwrap()
}

#[test]
fn gradient_buffers_use_injective_layouts_and_aggregate_broadcast_aliases__sum_contributions_of_a_top_level_broadcast_mode(
) {
    let layout = Layout::new(shape![4, 2], stride![0, 1]).unwrap();
    let w = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[4, 2]);
    for x in [
        with_layout(&[10.0, 20.0], layout.clone()),
        tc(&[10.0, 20.0], &[2])
            .with_layout_detached(layout.clone(), 0)
            .unwrap(),
    ] {
        let g = grad_of_product(&x, &w);
        assert_eq!(
            g.layout(),
            &Layout::new(shape![4, 2], stride![1, 4]).unwrap()
        );
        assert!(g.layout().is_injective());
        // Slot 0 is addressed by (i, 0): 1 + 3 + 5 + 7; slot 1 by (i, 1): 2 + 4 + 6 + 8.
        assert_eq!(v(&g), vec![16.0, 20.0, 16.0, 20.0, 16.0, 20.0, 16.0, 20.0]);
        for i in 0..4 {
            assert_eq!(g.get(&[i, 0]).unwrap().to_f64(), 16.0);
            assert_eq!(g.get(&[i, 1]).unwrap().to_f64(), 20.0);
        }
        // The carrier class follows the leaf (the result agrees across classes).
        assert_eq!(on_test_carrier(&g), on_test_carrier(&x));
        assert_eq!(on_cpu(&g), on_cpu(&x));
    }
}

#[test]
fn gradient_buffers_use_injective_layouts_and_aggregate_broadcast_aliases__sum_contributions_at_hierarchy_depth(
) {
    // Shape (2,(4,3)) with the nested 4-mode broadcast: slot of (i,(p,q)) is i + 2q.
    let layout = Layout::new(shape![2, [4, 3]], stride![1, [0, 2]]).unwrap();
    let contributions: Vec<f32> = (1..=24).map(|k| k as f32).collect();
    let w = Tensor::from_vec(contributions.clone(), shape![2, [4, 3]]).unwrap();
    for x in [
        with_layout(&[1.0; 6], layout.clone()),
        tc(&[1.0; 6], &[6])
            .with_layout_detached(layout.clone(), 0)
            .unwrap(),
    ] {
        let g = grad_of_product(&x, &w);
        assert_eq!(g.layout(), &Layout::canonical(shape![2, [4, 3]]).unwrap());
        assert_eq!(
            g.layout(),
            &Layout::new(shape![2, [4, 3]], stride![1, [2, 8]]).unwrap()
        );
        let values = v(&g);
        // Logical index of (i,(p,q)) is 12 i + p + 4 q; w there is that index + 1.
        for i in 0..2 {
            for q in 0..3 {
                let expected = (0..4).map(|p| (12 * i + p + 4 * q + 1) as f32).sum::<f32>();
                for p in 0..4 {
                    assert_eq!(values[12 * i + p + 4 * q], expected, "at ({i},({p},{q}))");
                }
            }
        }
        assert_eq!(values, folded(&layout, &contributions));
        assert_eq!(on_test_carrier(&g), on_test_carrier(&x));
    }

    // One level deeper: (2,(2,(3,2))) with the innermost 3-mode broadcast.
    let layout = Layout::new(shape![2, [2, [3, 2]]], stride![1, [2, [0, 4]]]).unwrap();
    let x = with_layout(&[1.0; 8], layout.clone());
    let w = Tensor::from_vec(contributions.clone(), shape![2, [2, [3, 2]]]).unwrap();
    let g = grad_of_product(&x, &w);
    assert_eq!(
        g.layout(),
        &Layout::new(shape![2, [2, [3, 2]]], stride![1, [2, [4, 12]]]).unwrap()
    );
    assert_eq!(v(&g), folded(&layout, &contributions));
}

#[test]
fn gradient_buffers_use_injective_layouts_and_aggregate_broadcast_aliases__an_injective_target_keeps_its_layout(
) {
    // Row strides with holes: (2,2):(4,1) over 8 slots.
    let holes = Layout::new(shape![2, 2], stride![4, 1]).unwrap();
    let transposed = Layout::new(shape![2, 3], stride![1, 2]).unwrap();
    let leaf_shape = Layout::new(Shape::from(3usize), Stride::from(2usize)).unwrap();
    for layout in [holes, transposed, leaf_shape] {
        let x = with_layout(&[1.0; 8], layout.clone());
        let y = mul_scalar(&x, 3.0).unwrap();
        let g: Vec<f32> = (0..layout.size()).map(|k| k as f32).collect();
        y.backward_with(Some(&y.f32_like(g.clone()).unwrap()), false)
            .unwrap();
        let xg = x.grad().unwrap().unwrap();
        assert_eq!(xg.layout(), &layout);
        assert_eq!(v(&xg), g.iter().map(|k| 3.0 * k).collect::<Vec<_>>());

        // The functional gradient uses the same layout.
        let y = mul_scalar(&x, 3.0).unwrap();
        let r = grad(
            &y,
            &[&x],
            &y.f32_like(g.clone()).unwrap(),
            GradOptions::default(),
        )
        .unwrap();
        let r = r[0].as_ref().unwrap();
        assert_eq!(r.layout(), &layout);
        assert_eq!(v(r), g.iter().map(|k| 3.0 * k).collect::<Vec<_>>());
    }
}

#[test]
fn gradient_buffers_use_injective_layouts_and_aggregate_broadcast_aliases__a_broadcast_leaf_accumulates_in_the_canonical_layout(
) {
    let layout = Layout::new(shape![3, 2], stride![0, 1]).unwrap();
    let x = with_layout(&[1.0, 2.0], layout);
    let g1 = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    x.backward_with(Some(&g1), false).unwrap();
    x.backward_with(Some(&g1), false).unwrap();
    let xg = x.grad().unwrap().unwrap();
    assert_eq!(xg.layout(), &Layout::canonical(shape![3, 2]).unwrap());
    assert_eq!(v(&xg), vec![18.0, 24.0, 18.0, 24.0, 18.0, 24.0]);
}

#[test]
fn gradient_buffers_use_injective_layouts_and_aggregate_broadcast_aliases__several_contributions_sum_in_the_target_layout(
) {
    let layouts = [
        Layout::new(shape![2, 3], stride![1, 2]).unwrap(),
        Layout::new(shape![2, 2], stride![4, 1]).unwrap(),
        Layout::new(shape![2, 3], stride![0, 1]).unwrap(),
        Layout::new(shape![2, [2, 3]], stride![1, [0, 2]]).unwrap(),
    ];
    for layout in layouts {
        let x = with_layout(&[1.0; 8], layout.clone());
        let n = layout.size();
        let y = mul_scalar(&x, 2.0).unwrap();
        let z = mul_scalar(&x, 3.0).unwrap();
        let w = mul_scalar(&x, -1.0).unwrap();
        let g: Vec<f32> = (0..n).map(|k| k as f32).collect();
        let contributions: Vec<f32> = g.iter().map(|k| 4.0 * k).collect();
        let expected_layout = if layout.is_injective() {
            layout.clone()
        } else {
            Layout::canonical(layout.shape().clone()).unwrap()
        };
        let expected = folded(&layout, &contributions);

        // Three consumers of x summed in one traversal, through backward and through grad.
        let total = autograd_ops::add(&autograd_ops::add(&y, &z).unwrap(), &w).unwrap();
        let cot = total.f32_like(g.clone()).unwrap();
        let r = grad(
            &total,
            &[&x],
            &cot,
            GradOptions {
                batched: false,
                retain_graph: true,
            },
        )
        .unwrap();
        let r = r[0].as_ref().unwrap();
        assert_eq!(r.layout(), &expected_layout, "{layout}");
        assert_eq!(v(r), expected, "{layout}");
        total.backward_with(Some(&cot), false).unwrap();
        let xg = x.grad().unwrap().unwrap();
        assert_eq!(xg.layout(), &expected_layout, "{layout}");
        assert!(xg.layout().is_injective());
        assert_eq!(v(&xg), expected, "{layout}");
        assert_eq!(v(&cot), g, "the supplied cotangent is not modified");
    }
}

#[test]
fn gradient_buffers_use_injective_layouts_and_aggregate_broadcast_aliases__a_large_permuted_target_keeps_its_layout(
) {
    // [8, 96, 128] stored as [96, 8, 128]: large enough that the gradient is laid out across
    // the kernel threads, a chunk of storage at a time
    let layout = Layout::new(shape![8, 96, 128], stride![128, 1024, 1]).unwrap();
    let n = layout.size();
    let x = with_layout(&vec![1.0; n], layout.clone());
    let wv: Vec<f32> = (0..n).map(|k| (k % 1009) as f32).collect();
    let w = Tensor::from_vec(wv.clone(), shape![8, 96, 128]).unwrap();
    let xg = grad_of_product(&x, &w);
    assert_eq!(xg.layout(), &layout);
    assert_eq!(v(&xg), wv);
}
