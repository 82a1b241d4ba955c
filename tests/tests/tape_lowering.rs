//! The lowered tape against the engine: on random tensor graphs built from the op library,
//! `backward_dense_all` on `Tape::lower(output)` gives the gradients `grad` gives, for every
//! leaf and every intermediate tensor, to 1e-5.

use autograd_core::tape::Tape;
use autograd_core::{grad, GradOptions, Shape, Tensor};
use autograd_ops::{add, add_scalar, broadcast_to, mul, mul_scalar, sum};
use proptest::prelude::*;

const ROWS: usize = 2;
const COLS: usize = 3;

/// One random op; indices pick operands of the right shape modulo the pool size.
#[derive(Debug, Clone)]
struct Step {
    kind: u8,
    i: usize,
    j: usize,
    c: f32,
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..12, any::<usize>(), any::<usize>(), -1.5f32..1.5).prop_map(|(kind, i, j, c)| Step {
        kind,
        i,
        j,
        c,
    })
}

fn tensor(values: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), Shape::from(dims)).unwrap()
}

/// Tensors by shape: a matrix `[ROWS, COLS]`, a vector `[COLS]` and a one-element `[1]`.
#[derive(Default)]
struct Pool {
    matrices: Vec<Tensor>,
    vectors: Vec<Tensor>,
    ones: Vec<Tensor>,
    /// Every tensor in creation order.
    all: Vec<Tensor>,
}

impl Pool {
    fn push(&mut self, t: Tensor) {
        match t.dims().as_slice() {
            [ROWS, COLS] => self.matrices.push(t.clone()),
            [COLS] => self.vectors.push(t.clone()),
            _ => self.ones.push(t.clone()),
        }
        self.all.push(t);
    }
}

fn pick(v: &[Tensor], i: usize) -> &Tensor {
    &v[i % v.len()]
}

fn build(leaves: &[Vec<f32>], steps: &[Step]) -> (Pool, usize) {
    let mut pool = Pool::default();
    pool.push(tensor(&leaves[0][..ROWS * COLS], &[ROWS, COLS]));
    pool.push(tensor(&leaves[1][..ROWS * COLS], &[ROWS, COLS]));
    pool.push(tensor(&leaves[2][..COLS], &[COLS]));
    pool.push(tensor(&leaves[3][..1], &[1]));
    let n_leaves = pool.all.len();
    for s in steps {
        let (m, v, o) = (&pool.matrices, &pool.vectors, &pool.ones);
        let t = match s.kind {
            0 => add(pick(m, s.i), pick(m, s.j)),
            1 => mul(pick(m, s.i), pick(m, s.j)),
            2 => add(pick(v, s.i), pick(v, s.j)),
            3 => mul(pick(v, s.i), pick(v, s.j)),
            4 => mul_scalar(pick(m, s.i), s.c),
            5 => add_scalar(pick(v, s.i), s.c),
            6 => sum(pick(m, s.i)),
            7 => sum(pick(v, s.i)),
            8 => broadcast_to(pick(v, s.i), &[ROWS, COLS]),
            9 => broadcast_to(pick(o, s.i), &[ROWS, COLS]),
            10 => broadcast_to(pick(o, s.i), &[COLS]),
            _ => mul(pick(o, s.i), pick(o, s.j)),
        }
        .unwrap();
        pool.push(t);
    }
    (pool, n_leaves)
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-5 * x.abs().max(y.abs()).max(1.0))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn lowered_tape_agrees_with_the_engine(
        leaves in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, ROWS * COLS), 4),
        steps in prop::collection::vec(step(), 1..20),
        out in any::<usize>(),
        seed in prop::collection::vec(-1.0f32..1.0, ROWS * COLS),
    ) {
        let (pool, n_leaves) = build(&leaves, &steps);
        // The output is one of the recorded results (so the graph is not a lone leaf).
        let output = &pool.all[n_leaves + out % (pool.all.len() - n_leaves)];
        let seed = output.f32_like(seed[..output.size()].to_vec()).unwrap();

        let lowered = Tape::lower(output).unwrap();
        let tape_grads = lowered.backward_all(&seed).unwrap();

        let inputs: Vec<&Tensor> = pool.all.iter().collect();
        let options = GradOptions { retain_graph: true, ..GradOptions::default() };
        let engine = grad(output, &inputs, &seed, options).unwrap();

        for (k, (t, expected)) in pool.all.iter().zip(&engine).enumerate() {
            let expected: Vec<f32> = match expected {
                Some(g) => g.values::<f32>().unwrap(),
                None => vec![0.0; t.size()],
            };
            let got: Vec<f32> = match lowered.id_of(t) {
                Some(id) => tape_grads[id].values::<f32>().unwrap(),
                None => vec![0.0; t.size()],
            };
            prop_assert!(close(&got, &expected), "tensor {}: tape {:?} vs engine {:?}", k, got, expected);
        }
        // Every leaf the output depends on is a node without parents.
        for t in &pool.all[..n_leaves] {
            if let Some(id) = lowered.id_of(t) {
                prop_assert!(lowered.tape().node(id).unwrap().parents.is_empty());
            }
        }
    }
}
