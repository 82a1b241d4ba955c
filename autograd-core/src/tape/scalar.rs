//! A fast scalar front-end, micrograd-style: record `f64` programs with operator overloading,
//! then one reverse sweep gives every gradient.
//!
//! ```
//! use autograd_core::tape::ScalarTape;
//!
//! let tape = ScalarTape::new();
//! let x = tape.var(2.0);
//! let y = x.sin() * x + 3.0;
//! let grads = tape.gradients(y);
//! // dy/dx = cos(x) x + sin(x)
//! assert!((grads[x] - (2.0f64.cos() * 2.0 + 2.0f64.sin())).abs() < 1e-12);
//! ```
//!
//! Design for speed: a generic [`Tape<f64>`] node carries a name, a parent `Vec` and a boxed
//! closure (three allocations), and its sweep allocates a `Vec` of contributions per node. Here
//! each recorded op is one 24-byte entry in a flat array: the `f64` value and a 16-byte op code
//! (parent ids as `u32`, plus a constant where the VJP needs one), so recording is one push.
//! The sweep is a single `match` per node over a flat `f64` adjoint array plus a bitset of
//! reached nodes (the `Option` per node of the generic sweep, in 8 bytes and 1 bit), and the
//! adjoint array, zero where unreached, is returned as is. The semantics are exactly those of
//! [`Tape::backward_dense_all`] on the equivalent generic tape ([`ScalarTape::to_tape`], whose
//! closures call the same VJP function): only reached nodes run their VJP, a first contribution
//! is kept as is and later ones are summed in the order produced.
//!
//! The tape sits behind a `RefCell` so that `Var`s (which borrow the tape) can record through
//! `&ScalarTape` in operator impls; a `Cell`-per-field design would not allow pushing to a
//! `Vec`, and `UnsafeCell` would buy little over one flag check per op. A `ScalarTape` is
//! therefore `Send` but not `Sync`: record on one thread.

use std::cell::RefCell;
use std::fmt;
use std::ops::{Add, AddAssign, Div, DivAssign, Index, Mul, MulAssign, Neg, Sub, SubAssign};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Node, Tape};

/// One recorded scalar op: parent ids and any constant its VJP needs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    /// An input that requires a gradient.
    Var,
    /// A constant leaf: no gradient is accumulated into it.
    Const,
    Add(u32, u32),
    Sub(u32, u32),
    Mul(u32, u32),
    Div(u32, u32),
    /// `x + c`, `c + x` or `x - c`.
    AddConst(u32),
    /// `c - x`.
    ConstSub(u32),
    /// `x * c` or `c * x`.
    MulConst(u32, f64),
    /// `x / c`.
    DivConst(u32, f64),
    /// `c / x`.
    ConstDiv(u32),
    Neg(u32),
    Sin(u32),
    Cos(u32),
    Exp(u32),
    Ln(u32),
    Tanh(u32),
    Powi(u32, i32),
    Sqrt(u32),
    Relu(u32),
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Var => "var",
            Op::Const => "const",
            Op::Add(..) => "add",
            Op::Sub(..) => "sub",
            Op::Mul(..) => "mul",
            Op::Div(..) => "div",
            Op::AddConst(..) => "add_const",
            Op::ConstSub(..) => "const_sub",
            Op::MulConst(..) => "mul_const",
            Op::DivConst(..) => "div_const",
            Op::ConstDiv(..) => "const_div",
            Op::Neg(..) => "neg",
            Op::Sin(..) => "sin",
            Op::Cos(..) => "cos",
            Op::Exp(..) => "exp",
            Op::Ln(..) => "ln",
            Op::Tanh(..) => "tanh",
            Op::Powi(..) => "powi",
            Op::Sqrt(..) => "sqrt",
            Op::Relu(..) => "relu",
        }
    }

    /// Parent ids in argument order.
    fn parents(self) -> ([u32; 2], usize) {
        match self {
            Op::Var | Op::Const => ([0, 0], 0),
            Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) | Op::Div(a, b) => ([a, b], 2),
            Op::AddConst(a)
            | Op::ConstSub(a)
            | Op::MulConst(a, _)
            | Op::DivConst(a, _)
            | Op::ConstDiv(a)
            | Op::Neg(a)
            | Op::Sin(a)
            | Op::Cos(a)
            | Op::Exp(a)
            | Op::Ln(a)
            | Op::Tanh(a)
            | Op::Powi(a, _)
            | Op::Sqrt(a)
            | Op::Relu(a) => ([a, 0], 1),
        }
    }
}

/// The contributions of one node's VJP, in order.
#[derive(Clone, Copy)]
enum Contrib {
    None,
    One(u32, f64),
    Two(u32, f64, u32, f64),
}

impl Contrib {
    fn to_vec(self) -> Vec<(usize, f64)> {
        match self {
            Contrib::None => Vec::new(),
            Contrib::One(a, ca) => vec![(a as usize, ca)],
            Contrib::Two(a, ca, b, cb) => vec![(a as usize, ca), (b as usize, cb)],
        }
    }
}

/// The local VJP of `op` at cotangent `g`, given the node's value `out` and the values of its
/// parents (`val(id)`). Shared by the fast sweep and [`ScalarTape::to_tape`], so both compute
/// bit-identical contributions.
#[inline]
fn vjp(op: Op, g: f64, out: f64, val: impl Fn(u32) -> f64) -> Contrib {
    match op {
        Op::Var | Op::Const => Contrib::None,
        // d(a + b) = da + db
        Op::Add(a, b) => Contrib::Two(a, g, b, g),
        // d(a - b) = da - db
        Op::Sub(a, b) => Contrib::Two(a, g, b, -g),
        // d(a b) = b da + a db
        Op::Mul(a, b) => Contrib::Two(a, g * val(b), b, g * val(a)),
        // d(a / b) = da / b - (a / b^2) db = da / b - (out / b) db
        Op::Div(a, b) => {
            let vb = val(b);
            Contrib::Two(a, g / vb, b, -g * out / vb)
        }
        Op::AddConst(a) => Contrib::One(a, g),
        Op::ConstSub(a) | Op::Neg(a) => Contrib::One(a, -g),
        Op::MulConst(a, c) => Contrib::One(a, g * c),
        Op::DivConst(a, c) => Contrib::One(a, g / c),
        // d(c / x) = -(c / x^2) dx = -(out / x) dx
        Op::ConstDiv(a) => Contrib::One(a, -g * out / val(a)),
        Op::Sin(a) => Contrib::One(a, g * val(a).cos()),
        Op::Cos(a) => Contrib::One(a, -g * val(a).sin()),
        Op::Exp(a) => Contrib::One(a, g * out),
        // singular at x = 0: 1/0
        Op::Ln(a) => Contrib::One(a, g / val(a)),
        Op::Tanh(a) => Contrib::One(a, g * (1.0 - out * out)),
        // d(x^0) = 0 (x^-1 would be singular at x = 0)
        Op::Powi(a, 0) => Contrib::One(a, g * 0.0),
        Op::Powi(a, n) => {
            let slope = match n.checked_sub(1) {
                Some(m) => val(a).powi(m),
                None => val(a).powf(f64::from(n) - 1.0),
            };
            Contrib::One(a, g * f64::from(n) * slope)
        }
        // singular at x = 0: 1/(2 * 0)
        Op::Sqrt(a) => Contrib::One(a, g * 0.5 / out),
        // relu'(0) = 0
        Op::Relu(a) => Contrib::One(a, if val(a) > 0.0 { g } else { 0.0 }),
    }
}

/// The reverse sweep from `out` over the nodes that `needs` accepts: only reached nodes run
/// their VJP; contributions to other nodes are dropped. (`needs` is a closure so the common
/// all-variables case compiles to a sweep without the test.)
fn sweep(nodes: &[Entry], adj: &mut Adjoints, out: u32, needs: impl Fn(usize) -> bool) {
    for i in (0..=out as usize).rev() {
        let Some(g) = adj.get(i).filter(|_| needs(i)) else {
            continue;
        };
        let node = nodes[i];
        let mut add = |a: u32, c: f64| {
            if needs(a as usize) {
                adj.accumulate(a, c);
            }
        };
        match vjp(node.op, g, node.value, |j| nodes[j as usize].value) {
            Contrib::None => {}
            Contrib::One(a, ca) => add(a, ca),
            Contrib::Two(a, ca, b, cb) => {
                add(a, ca);
                add(b, cb);
            }
        }
    }
}

/// Whether each node requires a gradient: inputs do, constants do not, and every op inherits
/// the disjunction of its parents' flags.
fn needs_grad(nodes: &[Entry]) -> Vec<bool> {
    let mut needs: Vec<bool> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let flag = match node.op {
            Op::Var => true,
            Op::Const => false,
            op => {
                let (ids, n) = op.parents();
                ids[..n].iter().any(|&p| needs[p as usize])
            }
        };
        needs.push(flag);
    }
    needs
}

/// The optional-gradient array of the sweep in two flat parts: `adj[i]` is meaningful once
/// bit `i` of `reached` is set, and stays `0.0` otherwise (so it is already totalized).
struct Adjoints {
    adj: Vec<f64>,
    reached: Vec<u64>,
}

impl Adjoints {
    fn new(n: usize) -> Adjoints {
        // Zeroed allocations: fresh pages need no explicit fill.
        Adjoints {
            adj: vec![0.0; n],
            reached: vec![0; n.div_ceil(64)],
        }
    }

    #[inline]
    fn get(&self, i: usize) -> Option<f64> {
        (self.reached[i / 64] >> (i % 64) & 1 == 1).then(|| self.adj[i])
    }

    /// Adds `c` into slot `i`: a first contribution is kept as is.
    #[inline]
    fn accumulate(&mut self, i: u32, c: f64) {
        let i = i as usize;
        let (word, bit) = (&mut self.reached[i / 64], 1u64 << (i % 64));
        if *word & bit == 0 {
            *word |= bit;
            self.adj[i] = c;
        } else {
            self.adj[i] += c;
        }
    }
}

/// One recorded node: its value and op, side by side so recording is a single push.
#[derive(Clone, Copy)]
struct Entry {
    value: f64,
    op: Op,
}

#[derive(Default)]
struct Inner {
    nodes: Vec<Entry>,
    has_constants: bool,
}

impl Inner {
    #[inline]
    fn push<'t>(&mut self, tape: &'t ScalarTape, value: f64, op: Op) -> Var<'t> {
        let Ok(id) = u32::try_from(self.nodes.len()) else {
            panic!("a scalar tape holds at most 2^32 nodes")
        };
        self.nodes.push(Entry { value, op });
        Var { tape, id }
    }
}

/// A tape for scalar (`f64`) programs, recorded through [`Var`]s with operator overloading.
///
/// Reuse one tape across iterations of an optimisation loop with [`clear`](ScalarTape::clear),
/// which keeps the allocated capacity.
///
/// # Panics
///
/// Recording more than 2^32 nodes on one tape panics (node ids are `u32`).
pub struct ScalarTape {
    inner: RefCell<Inner>,
    /// Unique for the life of the process, so gradients know the tape they came from.
    id: u64,
    /// Bumped by [`clear`](ScalarTape::clear), so gradients of a cleared recording are refused.
    generation: u64,
}

impl Default for ScalarTape {
    fn default() -> Self {
        ScalarTape::with_capacity(0)
    }
}

fn next_tape_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl fmt::Debug for ScalarTape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScalarTape({} nodes)", self.len())
    }
}

/// A scalar recorded on a [`ScalarTape`]: a node id and the tape it belongs to.
///
/// # Panics
///
/// Combining `Var`s of two different tapes panics.
#[derive(Clone, Copy)]
pub struct Var<'t> {
    tape: &'t ScalarTape,
    id: u32,
}

impl fmt::Debug for Var<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var(#{} = {})", self.id, self.value())
    }
}

impl ScalarTape {
    /// An empty tape.
    pub fn new() -> ScalarTape {
        ScalarTape::default()
    }

    /// An empty tape with room for `nodes` recorded ops.
    pub fn with_capacity(nodes: usize) -> ScalarTape {
        ScalarTape {
            inner: RefCell::new(Inner {
                nodes: Vec::with_capacity(nodes),
                has_constants: false,
            }),
            id: next_tape_id(),
            generation: 0,
        }
    }

    /// Number of recorded nodes.
    pub fn len(&self) -> usize {
        self.inner.borrow().nodes.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every node, keeping the capacity. Needs every `Var` of the tape to be gone.
    pub fn clear(&mut self) {
        let inner = self.inner.get_mut();
        inner.nodes.clear();
        inner.has_constants = false;
        self.generation += 1;
    }

    /// A new input that requires a gradient.
    #[inline]
    pub fn var(&self, value: f64) -> Var<'_> {
        self.inner.borrow_mut().push(self, value, Op::Var)
    }

    /// `values.len()` new inputs.
    pub fn vars(&self, values: &[f64]) -> Vec<Var<'_>> {
        values.iter().map(|&v| self.var(v)).collect()
    }

    /// A constant leaf: usable wherever a `Var` is, but it receives no gradient.
    pub fn constant(&self, value: f64) -> Var<'_> {
        let mut inner = self.inner.borrow_mut();
        inner.has_constants = true;
        inner.push(self, value, Op::Const)
    }

    /// The gradient of `output` with respect to every node (zero for nodes `output` does not
    /// depend on), by one reverse sweep from the unit seed.
    ///
    /// # Panics
    ///
    /// If `output` belongs to another tape.
    pub fn gradients(&self, output: Var<'_>) -> Gradients {
        self.gradients_seeded(output, 1.0)
    }

    /// [`gradients`](ScalarTape::gradients) with cotangent `seed` for `output`.
    ///
    /// # Panics
    ///
    /// If `output` belongs to another tape.
    pub fn gradients_seeded(&self, output: Var<'_>, seed: f64) -> Gradients {
        assert!(
            std::ptr::eq(self, output.tape),
            "gradients: the output Var belongs to another ScalarTape"
        );
        let inner = self.inner.borrow();
        let nodes = &inner.nodes[..];
        let out = output.id;
        let mut adj = Adjoints::new(nodes.len());
        adj.accumulate(out, seed);
        if inner.has_constants {
            // Nodes computed from constants alone do not require a gradient (a node inherits
            // the disjunction of its parents' flags): they neither run their VJP nor receive
            // contributions, as in the generic sweep; a seed placed on one is kept.
            let needs = needs_grad(nodes);
            sweep(nodes, &mut adj, out, |i| needs[i]);
        } else {
            sweep(nodes, &mut adj, out, |_| true);
        }
        let grads = adj.adj;
        Gradients {
            tape: (self.id, self.generation),
            grads,
        }
    }

    /// The equivalent generic tape: one [`Node`] per recorded op, with the same values, names
    /// (`"sin"`, `"mul_const"`, ...), parents and VJP; constants, and ops on constants alone,
    /// do not require a gradient.
    /// `backward_dense_all` on it gives exactly what [`gradients`](ScalarTape::gradients) gives.
    pub fn to_tape(&self) -> Tape<f64> {
        let inner = self.inner.borrow();
        let mut tape = Tape::empty();
        let value_of = |id: u32| inner.nodes.get(id as usize).map_or(0.0, |n| n.value);
        let needs = needs_grad(&inner.nodes);
        for (i, &Entry { value, op }) in inner.nodes.iter().enumerate() {
            let (ids, n) = op.parents();
            let known = [(ids[0], value_of(ids[0])), (ids[1], value_of(ids[1]))];
            let parents = ids[..n].iter().map(|&p| p as usize).collect();
            let node = Node::new(value, parents, move |g: &f64| {
                let val = |j: u32| {
                    if j == known[0].0 {
                        known[0].1
                    } else {
                        known[1].1
                    }
                };
                Ok(vjp(op, *g, value, val).to_vec())
            })
            .named(op.name())
            .with_requires_grad(needs[i]);
            tape.add_node(node);
        }
        tape
    }
}

impl<'t> Var<'t> {
    /// The forward value.
    pub fn value(self) -> f64 {
        self.tape.inner.borrow().nodes[self.id as usize].value
    }

    /// The node id on the tape (and on [`ScalarTape::to_tape`]).
    pub fn id(self) -> usize {
        self.id as usize
    }

    #[inline]
    fn unary(self, op: Op, f: impl FnOnce(f64) -> f64) -> Var<'t> {
        let mut inner = self.tape.inner.borrow_mut();
        let v = f(inner.nodes[self.id as usize].value);
        inner.push(self.tape, v, op)
    }

    #[inline]
    fn binary(self, other: Var<'t>, op: Op, f: impl FnOnce(f64, f64) -> f64) -> Var<'t> {
        assert!(
            std::ptr::eq(self.tape, other.tape),
            "cannot combine Vars of two different ScalarTapes"
        );
        let mut inner = self.tape.inner.borrow_mut();
        let v = f(
            inner.nodes[self.id as usize].value,
            inner.nodes[other.id as usize].value,
        );
        inner.push(self.tape, v, op)
    }

    /// `sin(x)`.
    #[inline]
    pub fn sin(self) -> Var<'t> {
        self.unary(Op::Sin(self.id), f64::sin)
    }
    /// `cos(x)`.
    #[inline]
    pub fn cos(self) -> Var<'t> {
        self.unary(Op::Cos(self.id), f64::cos)
    }
    /// `e^x`.
    #[inline]
    pub fn exp(self) -> Var<'t> {
        self.unary(Op::Exp(self.id), f64::exp)
    }
    /// The natural logarithm.
    #[inline]
    pub fn ln(self) -> Var<'t> {
        self.unary(Op::Ln(self.id), f64::ln)
    }
    /// `tanh(x)`.
    #[inline]
    pub fn tanh(self) -> Var<'t> {
        self.unary(Op::Tanh(self.id), f64::tanh)
    }
    /// `x^n` for an integer `n`.
    #[inline]
    pub fn powi(self, n: i32) -> Var<'t> {
        self.unary(Op::Powi(self.id, n), |x| x.powi(n))
    }
    /// The square root.
    #[inline]
    pub fn sqrt(self) -> Var<'t> {
        self.unary(Op::Sqrt(self.id), f64::sqrt)
    }
    /// `max(x, 0)`, with derivative 0 at `x = 0`.
    #[inline]
    pub fn relu(self) -> Var<'t> {
        self.unary(Op::Relu(self.id), |x| if x > 0.0 { x } else { 0.0 })
    }
}

impl<'t> Neg for Var<'t> {
    type Output = Var<'t>;
    #[inline]
    fn neg(self) -> Var<'t> {
        self.unary(Op::Neg(self.id), |x| -x)
    }
}

/// `Var ⊕ Var`, `Var ⊕ f64` and `f64 ⊕ Var` for one operator, plus `Var ⊕= Var | f64`.
macro_rules! binary_ops {
    ($Trait:ident, $method:ident, $Assign:ident, $assign:ident, $op:tt,
     $vv:ident, |$a:ident, $c:ident| $vc:expr, $cv:expr) => {
        impl<'t> $Trait for Var<'t> {
            type Output = Var<'t>;
            #[inline]
            fn $method(self, other: Var<'t>) -> Var<'t> {
                self.binary(other, Op::$vv(self.id, other.id), |x, y| x $op y)
            }
        }
        impl<'t> $Trait<f64> for Var<'t> {
            type Output = Var<'t>;
            #[inline]
            fn $method(self, $c: f64) -> Var<'t> {
                let $a = self.id;
                self.unary($vc, |x| x $op $c)
            }
        }
        impl<'t> $Trait<Var<'t>> for f64 {
            type Output = Var<'t>;
            #[inline]
            fn $method(self, v: Var<'t>) -> Var<'t> {
                let ($a, $c) = (v.id, self);
                v.unary($cv, |x| $c $op x)
            }
        }
        impl<'t> $Assign for Var<'t> {
            #[inline]
            fn $assign(&mut self, other: Var<'t>) {
                *self = *self $op other;
            }
        }
        impl $Assign<f64> for Var<'_> {
            #[inline]
            fn $assign(&mut self, c: f64) {
                *self = *self $op c;
            }
        }
    };
}

binary_ops!(Add, add, AddAssign, add_assign, +, Add, |a, c| Op::AddConst(a), Op::AddConst(a));
binary_ops!(Sub, sub, SubAssign, sub_assign, -, Sub, |a, c| Op::AddConst(a), Op::ConstSub(a));
binary_ops!(Mul, mul, MulAssign, mul_assign, *, Mul, |a, c| Op::MulConst(a, c), Op::MulConst(a, c));
binary_ops!(Div, div, DivAssign, div_assign, /, Div, |a, c| Op::DivConst(a, c), Op::ConstDiv(a));

/// Gradients from one sweep of a [`ScalarTape`], indexed by [`Var`] (or by node id through
/// [`as_slice`](Gradients::as_slice)).
#[derive(Clone, PartialEq)]
pub struct Gradients {
    /// The tape and recording that produced them, to refuse a `Var` of another.
    tape: (u64, u64),
    grads: Vec<f64>,
}

impl fmt::Debug for Gradients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Gradients").field(&self.grads).finish()
    }
}

impl Gradients {
    /// The gradient with respect to `v`: zero for a node recorded after the sweep's output.
    ///
    /// # Panics
    ///
    /// If `v` belongs to another tape, or to a recording of this tape made after a `clear`.
    #[inline]
    pub fn wrt(&self, v: Var<'_>) -> f64 {
        *self.slot(v)
    }

    #[inline]
    fn slot(&self, v: Var<'_>) -> &f64 {
        assert!(
            (v.tape.id, v.tape.generation) == self.tape,
            "Gradients: the Var belongs to another ScalarTape (or to a later recording of this one)"
        );
        self.grads.get(v.id as usize).unwrap_or(&0.0)
    }

    /// One gradient per node id.
    pub fn as_slice(&self) -> &[f64] {
        &self.grads
    }

    /// One gradient per node id.
    pub fn into_vec(self) -> Vec<f64> {
        self.grads
    }
}

impl Index<Var<'_>> for Gradients {
    type Output = f64;
    #[inline]
    fn index(&self, v: Var<'_>) -> &f64 {
        self.slot(v)
    }
}

/// Workload T1 (the W1s chain on the scalar front-end): records `y = x`, then `steps` times
/// `y = y * 0.999 + x` (two ops a step), sweeps from `y`, and returns the total time, tape
/// creation and drop included. Nanoseconds per recorded op = `time / (2 * steps + 1)`.
pub fn bench_t1(steps: usize) -> Duration {
    let start = Instant::now();
    let dx = {
        let tape = ScalarTape::new();
        let x = tape.var(0.5);
        let mut y = x;
        for _ in 0..steps {
            y = y * 0.999 + x;
        }
        tape.gradients(y).wrt(x)
    };
    let elapsed = start.elapsed();
    std::hint::black_box(dx);
    elapsed
}
