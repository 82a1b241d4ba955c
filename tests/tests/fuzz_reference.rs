//! The plain-loop reference of `fuzz_views.rs` (`mod fuzz_reference;` there): what every view,
//! elementwise op and reduction should give, computed from the base tensor's storage with
//! loops of its own and no call into the library beyond the `IntTuple` data type.
//!
//! A value of the reference is a [`Model`]: a shape tree and the values in logical order
//! (DESIGN.md, "Logical order": row-major over the top-level modes, each nested mode's
//! sub-coordinate its colexicographic index). Every op is a function of those two, so the same
//! functions give the forward values and, re-run on perturbed storage, the finite differences.
//!
//! Cargo also builds this file as a test target of its own; it holds no tests.
#![allow(dead_code)]

use autograd_core::{ErrorKind, IntTuple};

/// One tensor as the reference sees it.
#[derive(Debug, Clone)]
pub struct Model {
    /// The shape tree the library should report.
    pub shape: IntTuple,
    /// The values in logical order.
    pub vals: Vec<f64>,
    /// For a view of the base (no copy, no arithmetic): the base storage slot each logical
    /// position reads.
    pub slots: Option<Vec<usize>>,
    /// Whether the values are copies of storage elements (views and copies, no arithmetic), so
    /// the library must give them bit for bit.
    pub exact: bool,
}

/// What a call should do: succeed with these results, fail with one of these kinds, or either
/// (a `view` whose possibility the reference does not decide).
#[derive(Debug, Clone)]
pub enum Expect {
    /// Succeeds with these results.
    Ok(Vec<Model>),
    /// Fails with an error of one of these kinds.
    Err(Vec<ErrorKind>),
    /// Either succeeds with these results or fails with one of these kinds.
    Either(Vec<Model>, Vec<ErrorKind>),
}

/// A refusal of `kind`.
fn refuse(kind: ErrorKind) -> Expect {
    Expect::Err(vec![kind])
}

// ---- integer trees ------------------------------------------------------------------------

/// The top-level modes of a shape tree: a bare leaf is its own single mode.
pub fn top_modes(t: &IntTuple) -> Vec<IntTuple> {
    match t {
        IntTuple::Int(_) => vec![t.clone()],
        IntTuple::Tuple(v) => v.clone(),
    }
}

/// The leaves of a tree, depth first, left to right.
pub fn leaves_of(t: &IntTuple) -> Vec<i64> {
    match t {
        IntTuple::Int(x) => vec![*x],
        IntTuple::Tuple(v) => v.iter().flat_map(leaves_of).collect(),
    }
}

/// The number of positions of a (sub)tree: the product of its leaves.
fn count(t: &IntTuple) -> usize {
    leaves_of(t).iter().map(|&e| e as usize).product()
}

/// The top-level extents of a shape tree.
pub fn dims_of(shape: &IntTuple) -> Vec<usize> {
    top_modes(shape).iter().map(count).collect()
}

/// A flat tuple of leaves (what `Shape::from(&[usize])` builds).
pub fn flat(dims: &[usize]) -> IntTuple {
    IntTuple::Tuple(dims.iter().map(|&d| IntTuple::Int(d as i64)).collect())
}

/// The row-major coordinate of logical position `p` over `dims`.
pub fn coord_of(dims: &[usize], mut p: usize) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        c[i] = p % dims[i];
        p /= dims[i];
    }
    c
}

/// The logical position of a row-major coordinate over `dims`.
pub fn index_of(dims: &[usize], c: &[usize]) -> usize {
    dims.iter().zip(c).fold(0, |acc, (&d, &x)| acc * d + x)
}

/// The storage slot of every logical position of `shape:stride` placed at `offset`.
pub fn base_slots(shape: &IntTuple, stride: &IntTuple, offset: usize) -> Vec<usize> {
    let shape_modes = top_modes(shape);
    let stride_modes = top_modes(stride);
    // per top-level mode, the offset of each sub-coordinate (colexicographic: first leaf fastest)
    let per_mode: Vec<Vec<usize>> = shape_modes
        .iter()
        .zip(&stride_modes)
        .map(|(m, s)| {
            let ext = leaves_of(m);
            let st = leaves_of(s);
            (0..count(m))
                .map(|mut c| {
                    let mut off = 0;
                    for (&e, &d) in ext.iter().zip(&st) {
                        off += (c % e as usize) * d as usize;
                        c /= e as usize;
                    }
                    off
                })
                .collect()
        })
        .collect();
    let dims = dims_of(shape);
    let n: usize = dims.iter().product();
    (0..n)
        .map(|p| {
            let c = coord_of(&dims, p);
            offset + c.iter().zip(&per_mode).map(|(&x, m)| m[x]).sum::<usize>()
        })
        .collect()
}

/// How a layout's leaves alias storage, decided by enumeration: `None` when injective,
/// `Some(true)` when the collisions vanish once stride-0 modes are dropped (broadcast),
/// `Some(false)` otherwise.
pub fn aliasing(shape: &IntTuple, stride: &IntTuple) -> Option<bool> {
    let slots = base_slots(shape, stride, 0);
    if distinct(&slots) {
        return None;
    }
    let kept: Vec<(i64, i64)> = leaves_of(shape)
        .into_iter()
        .zip(leaves_of(stride))
        .filter(|&(e, s)| e > 1 && s != 0)
        .collect();
    let (es, ss): (Vec<i64>, Vec<i64>) = kept.into_iter().unzip();
    let reduced = base_slots(&flat_i64(&es), &flat_i64(&ss), 0);
    Some(distinct(&reduced))
}

fn flat_i64(v: &[i64]) -> IntTuple {
    IntTuple::Tuple(v.iter().map(|&x| IntTuple::Int(x)).collect())
}

fn distinct(v: &[usize]) -> bool {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.windows(2).all(|w| w[0] != w[1])
}

// ---- models -------------------------------------------------------------------------------

impl Model {
    /// The base tensor: `shape:stride` at `offset` over `storage`.
    pub fn base(shape: &IntTuple, stride: &IntTuple, offset: usize, storage: &[f64]) -> Model {
        let slots = base_slots(shape, stride, offset);
        Model {
            shape: shape.clone(),
            vals: slots.iter().map(|&s| storage[s]).collect(),
            slots: Some(slots),
            exact: true,
        }
    }

    /// A constant (no storage of the base behind it).
    pub fn constant(dims: &[usize], vals: Vec<f64>) -> Model {
        Model {
            shape: flat(dims),
            vals,
            slots: None,
            exact: true,
        }
    }

    /// The top-level extents.
    pub fn dims(&self) -> Vec<usize> {
        dims_of(&self.shape)
    }

    /// The number of top-level modes.
    pub fn rank(&self) -> usize {
        top_modes(&self.shape).len()
    }

    /// A view of `shape` whose position `p` reads position `source[p]` of `self`.
    fn pick(&self, shape: IntTuple, source: &[usize]) -> Model {
        Model {
            shape,
            vals: source.iter().map(|&i| self.vals[i]).collect(),
            slots: self
                .slots
                .as_ref()
                .map(|s| source.iter().map(|&i| s[i]).collect()),
            exact: self.exact,
        }
    }

    /// A view of `shape` whose coordinate `c` reads coordinate `back(c)` of `self`.
    fn reindex(&self, shape: IntTuple, back: impl Fn(&[usize]) -> Vec<usize>) -> Model {
        let own = self.dims();
        let new = dims_of(&shape);
        let n: usize = new.iter().product();
        let source: Vec<usize> = (0..n)
            .map(|p| index_of(&own, &back(&coord_of(&new, p))))
            .collect();
        self.pick(shape, &source)
    }

    /// The same values in logical order under another tree.
    fn relabel(&self, shape: IntTuple) -> Model {
        Model {
            shape,
            ..self.clone()
        }
    }

    /// Arithmetic on the values: no longer a view, no longer exact.
    fn computed(shape: IntTuple, vals: Vec<f64>) -> Model {
        Model {
            shape,
            vals,
            slots: None,
            exact: false,
        }
    }

    /// Whether the positions read consecutive storage slots (storage order is logical order),
    /// so a `view` to any extents of the same size must succeed and a `reshape` must not copy.
    /// Empty tensors are left out (see [`view`]).
    pub fn is_contiguous_view(&self) -> bool {
        self.slots
            .as_ref()
            .is_some_and(|s| !s.is_empty() && s.windows(2).all(|w| w[1] == w[0] + 1))
    }
}

/// A tree with top-level modes `modes`, kept a bare leaf when `self` was one and one mode is
/// left (what the library's rebuild does for permute and narrow).
fn rebuild(old: &IntTuple, modes: Vec<IntTuple>) -> IntTuple {
    match old {
        IntTuple::Int(_) if modes.len() == 1 => {
            modes.into_iter().next().unwrap_or(IntTuple::Int(1))
        }
        _ => IntTuple::Tuple(modes),
    }
}

/// `transpose(a, b)`.
pub fn transpose(m: &Model, a: usize, b: usize) -> Expect {
    let rank = m.rank();
    if a >= rank || b >= rank {
        return refuse(ErrorKind::Value);
    }
    let mut order: Vec<usize> = (0..rank).collect();
    order.swap(a, b);
    permute(m, &order)
}

/// `permute(order)`: mode `i` of the result is mode `order[i]`.
pub fn permute(m: &Model, order: &[usize]) -> Expect {
    let rank = m.rank();
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    if sorted != (0..rank).collect::<Vec<_>>() {
        return refuse(ErrorKind::Value);
    }
    let modes = top_modes(&m.shape);
    let shape = rebuild(&m.shape, order.iter().map(|&i| modes[i].clone()).collect());
    let order = order.to_vec();
    Expect::Ok(vec![m.reindex(shape, |c| {
        let mut back = vec![0; c.len()];
        for (i, &o) in order.iter().enumerate() {
            back[o] = c[i];
        }
        back
    })])
}

/// `narrow(dim, start, len)` (and `slice`): only a leaf mode can be cut.
pub fn narrow(m: &Model, dim: usize, start: usize, len: usize) -> Expect {
    let modes = top_modes(&m.shape);
    let Some(mode) = modes.get(dim) else {
        return refuse(ErrorKind::Value);
    };
    let extent = count(mode);
    let in_range = start.checked_add(len).is_some_and(|end| end <= extent);
    if !matches!(mode, IntTuple::Int(_)) {
        // a nested mode: the op refuses it; a bad range on it is refused too, with either kind
        return if in_range {
            refuse(ErrorKind::NotImplemented)
        } else {
            Expect::Err(vec![ErrorKind::NotImplemented, ErrorKind::Value])
        };
    }
    if !in_range {
        return refuse(ErrorKind::Value);
    }
    let mut new = modes.clone();
    new[dim] = IntTuple::Int(len as i64);
    let shape = rebuild(&m.shape, new);
    Expect::Ok(vec![m.reindex(shape, |c| {
        let mut back = c.to_vec();
        back[dim] += start;
        back
    })])
}

/// `select(dim, index)`: that mode removed.
pub fn select(m: &Model, dim: usize, index: usize) -> Expect {
    let dims = m.dims();
    if dim >= dims.len() || index >= dims[dim] {
        return refuse(ErrorKind::Value);
    }
    let mut modes = top_modes(&m.shape);
    modes.remove(dim);
    Expect::Ok(vec![m.reindex(IntTuple::Tuple(modes), |c| {
        let mut back = c.to_vec();
        back.insert(dim, index);
        back
    })])
}

/// `unbind(dim)`: every `select(dim, i)`.
pub fn unbind(m: &Model, dim: usize) -> Expect {
    let dims = m.dims();
    if dim >= dims.len() {
        return refuse(ErrorKind::Value);
    }
    let mut out = Vec::new();
    for i in 0..dims[dim] {
        match select(m, dim, i) {
            Expect::Ok(v) => out.extend(v),
            other => return other,
        }
    }
    Expect::Ok(out)
}

/// `broadcast_to(dims)` (and `expand`), numpy style: aligned at the end; new leading modes and
/// modes of one element repeat (stride 0), a mode of the asked extent is kept as it is.
pub fn broadcast_to(m: &Model, target: &[usize]) -> Expect {
    let own = m.dims();
    if target.len() < own.len() {
        return refuse(ErrorKind::Value);
    }
    let lead = target.len() - own.len();
    let modes = top_modes(&m.shape);
    let mut shape = Vec::with_capacity(target.len());
    for (i, &d) in target.iter().enumerate() {
        if i < lead {
            shape.push(IntTuple::Int(d as i64));
        } else if own[i - lead] == d {
            shape.push(modes[i - lead].clone());
        } else if own[i - lead] == 1 {
            shape.push(IntTuple::Int(d as i64));
        } else {
            return refuse(ErrorKind::Value);
        }
    }
    Expect::Ok(vec![m.reindex(IntTuple::Tuple(shape), |c| {
        c[lead..]
            .iter()
            .zip(&own)
            .map(|(&x, &e)| if e == 1 { 0 } else { x })
            .collect()
    })])
}

/// `reshape(dims)`: the values in logical order under flat extents `dims`.
pub fn reshape(m: &Model, dims: &[usize]) -> Expect {
    if dims.iter().product::<usize>() != m.vals.len() {
        return refuse(ErrorKind::Value);
    }
    Expect::Ok(vec![m.relabel(flat(dims))])
}

/// `view(dims)`: a reshape that refuses to copy; it must succeed where storage order is logical
/// order and for every empty tensor (as PyTorch's `computeStride`), and may be refused
/// (`Error::Value`) elsewhere.
pub fn view(m: &Model, dims: &[usize]) -> Expect {
    match reshape(m, dims) {
        Expect::Ok(v) if m.vals.is_empty() || m.is_contiguous_view() => Expect::Ok(v),
        Expect::Ok(v) => Expect::Either(v, vec![ErrorKind::Value]),
        other => other,
    }
}

/// `flatten(start, end)`: modes `start..=end` merged, the others kept as flat modes.
pub fn flatten(m: &Model, start: usize, end: usize) -> Expect {
    let dims = m.dims();
    if start > end || end >= dims.len() {
        return refuse(ErrorKind::Value);
    }
    let mut out = dims[..start].to_vec();
    out.push(dims[start..=end].iter().product());
    out.extend_from_slice(&dims[end + 1..]);
    Expect::Ok(vec![m.relabel(flat(&out))])
}

/// `unsqueeze(dim)`: a leaf mode of extent 1 inserted at `dim` (`0..=rank`).
pub fn unsqueeze(m: &Model, dim: usize) -> Expect {
    let mut modes = top_modes(&m.shape);
    if dim > modes.len() {
        return refuse(ErrorKind::Value);
    }
    modes.insert(dim, IntTuple::Int(1));
    Expect::Ok(vec![m.relabel(IntTuple::Tuple(modes))])
}

/// `squeeze(dim)`: mode `dim`, of extent 1, removed.
pub fn squeeze(m: &Model, dim: usize) -> Expect {
    let dims = m.dims();
    if dim >= dims.len() || dims[dim] != 1 {
        return refuse(ErrorKind::Value);
    }
    let mut modes = top_modes(&m.shape);
    modes.remove(dim);
    Expect::Ok(vec![m.relabel(IntTuple::Tuple(modes))])
}

// ---- arithmetic ---------------------------------------------------------------------------

/// `f` at every position; the shape is kept.
pub fn unary(m: &Model, f: impl Fn(f64) -> f64) -> Expect {
    Expect::Ok(vec![Model::computed(
        m.shape.clone(),
        m.vals.iter().map(|&x| f(x)).collect(),
    )])
}

/// The numpy broadcast of two lists of extents.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|i| {
            let p = (i + a.len()).checked_sub(rank).map_or(1, |j| a[j]);
            let q = (i + b.len()).checked_sub(rank).map_or(1, |j| b[j]);
            match (p, q) {
                _ if p == q => Some(p),
                (1, _) => Some(q),
                (_, 1) => Some(p),
                _ => None,
            }
        })
        .collect()
}

/// Both operands brought to their common extents (an operand that has them is kept as it is);
/// `None` when they do not broadcast.
pub fn broadcast_operands(a: &Model, b: &Model) -> Option<(Model, Model)> {
    if a.shape == b.shape {
        return Some((a.clone(), b.clone()));
    }
    let dims = broadcast_dims(&a.dims(), &b.dims())?;
    let lift = |m: &Model| {
        if m.dims() == dims {
            return Some(m.clone());
        }
        match broadcast_to(m, &dims) {
            Expect::Ok(mut v) => v.pop(),
            _ => None,
        }
    };
    Some((lift(a)?, lift(b)?))
}

/// `f(a, b)` with numpy broadcasting; the result takes the first operand's (broadcast) tree.
pub fn binary(a: &Model, b: &Model, f: impl Fn(f64, f64) -> f64) -> Expect {
    let Some((a, b)) = broadcast_operands(a, b) else {
        return refuse(ErrorKind::Value);
    };
    let vals = a.vals.iter().zip(&b.vals).map(|(&x, &y)| f(x, y)).collect();
    Expect::Ok(vec![Model::computed(a.shape, vals)])
}

/// The sum of every element, as shape `(1)`.
pub fn sum(m: &Model) -> Expect {
    Expect::Ok(vec![Model::computed(flat(&[1]), vec![m.vals.iter().sum()])])
}

/// The sum (or mean, when `mean`) over the top-level `axes`, flat result extents.
pub fn sum_axes(m: &Model, axes: &[usize], keepdim: bool, mean: bool) -> Expect {
    let dims = m.dims();
    let mut reduced = vec![false; dims.len()];
    for &a in axes {
        if a >= dims.len() || reduced[a] {
            return refuse(ErrorKind::Value);
        }
        reduced[a] = true;
    }
    let kept: Vec<usize> = (0..dims.len()).filter(|&i| !reduced[i]).collect();
    let kept_dims: Vec<usize> = kept.iter().map(|&i| dims[i]).collect();
    let out_dims: Vec<usize> = if keepdim {
        (0..dims.len())
            .map(|i| if reduced[i] { 1 } else { dims[i] })
            .collect()
    } else {
        kept_dims.clone()
    };
    let groups: usize = kept_dims.iter().product();
    let mut acc = vec![0.0f64; groups];
    for (p, &x) in m.vals.iter().enumerate() {
        let c = coord_of(&dims, p);
        let k: Vec<usize> = kept.iter().map(|&i| c[i]).collect();
        acc[index_of(&kept_dims, &k)] += x;
    }
    if mean {
        let r: usize = axes.iter().map(|&a| dims[a]).product();
        for s in &mut acc {
            *s /= r as f64;
        }
    }
    Expect::Ok(vec![Model::computed(flat(&out_dims), acc)])
}
