//! Data-parallel training on MPI, run under `mpirun -np N` (N = 1, 2, 3): one process per
//! rank, one MPI initialisation, every check in turn, once with sums through the ranks' shared
//! memory and once through MPI's all-reduces (`ok NAME` on rank 0 per check and mode). A failed
//! check prints why and exits non-zero, which makes `mpirun` end the whole job; its time is
//! bounded by the `timeout` that `scripts/mpi-tests` runs it under.
//!
//! Every rank computes the single-process reference itself, on the whole global batch.

use std::process::ExitCode;

use autograd_core::ops::mul;
use autograd_core::{shape, DType, ErrorKind, Rng, Tensor};
use autograd_ops::distributed::{Ddp, DdpOptions, ReduceOp, World};
use autograd_ops::{
    cross_entropy, relu, AdamW, AdamWConfig, CrossEntropyOptions, Linear, Module, Optimizer, Sgd,
    SgdConfig,
};

type Check = Result<(), String>;

/// `Err(message)` unless `cond`.
macro_rules! check {
    ($cond:expr, $($arg:tt)+) => {
        let held: bool = $cond;
        if !held {
            return Err(format!($($arg)+));
        }
    };
}

/// `Ok(x)`, or the error as a check failure saying where.
macro_rules! tri {
    ($e:expr) => {
        $e.map_err(|e| format!("{}:{}: {e}", file!(), line!()))?
    };
}

const FEATURES: usize = 5;
const HIDDEN: usize = 7;
const CLASSES: usize = 3;
/// Divisible by 1, 2, 3 and 4 ranks, and each share by 2 (two micro-batches).
const GLOBAL_BATCH: usize = 24;
const STEPS: usize = 4;

#[derive(Module)]
struct Net {
    l1: Linear,
    l2: Linear,
}

impl Net {
    fn new(seed: u64, hidden: usize) -> autograd_core::Result<Net> {
        let mut rng = Rng::new(seed);
        Ok(Net {
            l1: Linear::new(FEATURES, hidden, true, &mut rng)?,
            l2: Linear::new(hidden, CLASSES, true, &mut rng)?,
        })
    }

    fn loss(&self, x: &Tensor, y: &Tensor) -> autograd_core::Result<Tensor> {
        let logits = self.l2.forward(&relu(&self.l1.forward(x)?)?)?;
        cross_entropy(&logits, y, CrossEntropyOptions::default())
    }
}

/// The global batch of step `step`, the same on every rank.
fn batch(step: usize) -> autograd_core::Result<(Tensor, Tensor)> {
    let mut rng = Rng::new(100 + step as u64);
    let x = Tensor::randn(shape![GLOBAL_BATCH, FEATURES], &mut rng)?;
    let y: Vec<i64> = (0..GLOBAL_BATCH)
        .map(|i| ((i * 7 + step) % CLASSES) as i64)
        .collect();
    Ok((x, Tensor::from_vec(y, shape![GLOBAL_BATCH])?))
}

/// This rank's rows of a global batch.
fn share(world: &World, t: &Tensor) -> autograd_core::Result<Tensor> {
    let n = GLOBAL_BATCH / world.size();
    t.narrow(0, world.rank() * n, n)?.contiguous()
}

fn sgd(params: Vec<Tensor>) -> autograd_core::Result<Sgd> {
    Sgd::new(
        params,
        SgdConfig {
            lr: 0.2,
            momentum: 0.9,
            ..SgdConfig::default()
        },
    )
}

/// Every parameter value of `module`, in order.
fn flat(module: &dyn Module) -> autograd_core::Result<Vec<f32>> {
    let mut all = Vec::new();
    for p in module.parameters() {
        all.extend(p.to_vec::<f32>()?);
    }
    Ok(all)
}

/// The largest elementwise difference; infinite for different lengths or any NaN (a missing
/// gradient in [`grads`]), so that no check passes on NaN.
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let d = (x - y).abs();
            if d.is_nan() {
                f32::INFINITY
            } else {
                d
            }
        })
        .fold(0.0, f32::max)
}

/// The model after `STEPS` single-process steps on the whole global batches, from rank 0's
/// initialisation.
fn single_process() -> autograd_core::Result<Vec<f32>> {
    let net = Net::new(1, HIDDEN)?;
    let mut opt = sgd(net.parameters())?;
    for step in 0..STEPS {
        let (x, y) = batch(step)?;
        opt.zero_grad()?;
        net.loss(&x, &y)?.backward()?;
        opt.step()?;
    }
    flat(&net)
}

/// Trains a `Ddp` from a different initialisation on every rank for `STEPS` steps on this
/// rank's shares; returns the parameters.
fn data_parallel(world: &World, options: DdpOptions) -> autograd_core::Result<Vec<f32>> {
    let ddp = Ddp::new(world, Net::new(1 + world.rank() as u64, HIDDEN)?, options)?;
    let mut opt = sgd(ddp.module().parameters())?;
    for step in 0..STEPS {
        let (x, y) = batch(step)?;
        opt.zero_grad()?;
        ddp.backward(&ddp.module().loss(&share(world, &x)?, &share(world, &y)?)?)?;
        opt.step()?;
    }
    flat(ddp.module())
}

/// Whether `values` are bitwise the same on every rank.
fn same_everywhere(world: &World, values: &[f32]) -> autograd_core::Result<bool> {
    let mine = Tensor::from_vec(values.to_vec(), shape![values.len()])?;
    let all = world.all_gather(&mine)?.to_vec::<f32>()?;
    Ok(all.chunks_exact(values.len().max(1)).all(|row| {
        row.iter()
            .zip(values)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    }))
}

fn replicas_equal_each_other_and_one_process(world: &World) -> Check {
    let reference = tri!(single_process());
    let trained = tri!(data_parallel(world, DdpOptions::default()));
    check!(
        tri!(same_everywhere(world, &trained)),
        "the replicas differ after {STEPS} steps"
    );
    let d = max_diff(&trained, &reference);
    check!(d <= 1e-6, "data parallel differs from one process by {d}");
    let moved = max_diff(&trained, &tri!(flat(&tri!(Net::new(1, HIDDEN)))));
    check!(
        moved > 1e-3,
        "training moved the parameters by {moved} only"
    );
    Ok(())
}

fn bucket_boundaries_do_not_change_results(world: &World) -> Check {
    let one = tri!(data_parallel(world, DdpOptions::default()));
    let many = tri!(data_parallel(world, DdpOptions { bucket_bytes: 40 }));
    let each = tri!(data_parallel(world, DdpOptions { bucket_bytes: 1 }));
    let ddp = tri!(Ddp::new(
        world,
        tri!(Net::new(1, HIDDEN)),
        DdpOptions { bucket_bytes: 40 }
    ));
    check!(
        ddp.bucket_count() > 2,
        "40-byte buckets gave {} buckets",
        ddp.bucket_count()
    );
    let d = max_diff(&one, &many).max(max_diff(&one, &each));
    check!(d <= 1e-6, "bucket sizes change the result by {d}");
    Ok(())
}

/// The optimizers `backward_step` is checked with: SGD with momentum, AdamW with weight decay,
/// and SGD over the second layer only (the first is averaged, not stepped).
fn optimizers(net: &Net) -> autograd_core::Result<Vec<Box<dyn Optimizer>>> {
    Ok(vec![
        Box::new(sgd(net.parameters())?),
        Box::new(AdamW::new(
            net.parameters(),
            AdamWConfig {
                lr: 0.05,
                weight_decay: 0.1,
                ..AdamWConfig::default()
            },
        )?),
        Box::new(sgd(net.l2.parameters())?),
    ])
}

/// What a [`Recording`] optimizer runs before each step.
type BeforeStep<'a> = Box<dyn FnMut() -> autograd_core::Result<()> + 'a>;

/// An optimizer that records how many gradients each of its steps takes, runs `before` ahead
/// of each, and steps each parameter apart only when `apart` says so.
struct Recording<'a> {
    inner: Box<dyn Optimizer + 'a>,
    apart: bool,
    steps: Vec<usize>,
    before: BeforeStep<'a>,
}

impl<'a> Recording<'a> {
    fn new(inner: Box<dyn Optimizer + 'a>, apart: bool) -> Recording<'a> {
        Recording {
            inner,
            apart,
            steps: Vec::new(),
            before: Box::new(|| Ok(())),
        }
    }
}

impl Optimizer for Recording<'_> {
    fn params(&self) -> &[Tensor] {
        self.inner.params()
    }
    fn step_with(&mut self, grads: &[Option<Tensor>]) -> autograd_core::Result<()> {
        (self.before)()?;
        self.steps
            .push(grads.iter().filter(|g| g.is_some()).count());
        self.inner.step_with(grads)
    }
    fn lr(&self) -> f32 {
        self.inner.lr()
    }
    fn set_lr(&mut self, lr: f32) -> autograd_core::Result<()> {
        self.inner.set_lr(lr)
    }
    fn steps_each_parameter_apart(&self) -> bool {
        self.apart
    }
}

/// `STEPS` steps on this rank's shares: `plain` with `backward` and `step`, `fused` with
/// `backward_step`.
fn train_both(
    world: &World,
    (plain, plain_opt): (&Ddp<'_, Net>, &mut dyn Optimizer),
    (fused, fused_opt): (&Ddp<'_, Net>, &mut Recording<'_>),
) -> autograd_core::Result<()> {
    for step in 0..STEPS {
        let (x, y) = batch(step)?;
        let (x, y) = (share(world, &x)?, share(world, &y)?);
        plain_opt.zero_grad()?;
        plain.backward(&plain.module().loss(&x, &y)?)?;
        plain_opt.step()?;
        fused_opt.zero_grad()?;
        fused.backward_step(&fused.module().loss(&x, &y)?, fused_opt)?;
    }
    Ok(())
}

fn backward_step_equals_backward_then_step(world: &World) -> Check {
    for bucket_bytes in [DdpOptions::default().bucket_bytes, 40] {
        let options = DdpOptions { bucket_bytes };
        for (k, apart) in (0..3).flat_map(|k| [(k, true), (k, false)]) {
            // the same initialisation for both, a different one on every rank
            let seed = 1 + world.rank() as u64;
            let plain = tri!(Ddp::new(world, tri!(Net::new(seed, HIDDEN)), options));
            let fused = tri!(Ddp::new(world, tri!(Net::new(seed, HIDDEN)), options));
            let mut plain_opt = tri!(optimizers(plain.module())).swap_remove(k);
            let inner = tri!(optimizers(fused.module())).swap_remove(k);
            check!(
                inner.steps_each_parameter_apart(),
                "optimizer {k} does not step its parameters apart"
            );
            let stepped = inner.params().len();
            let mut fused_opt = Recording::new(inner, apart);
            tri!(train_both(
                world,
                (&plain, plain_opt.as_mut()),
                (&fused, &mut fused_opt)
            ));
            let (a, f) = (tri!(flat(plain.module())), tri!(flat(fused.module())));
            let differ = a
                .iter()
                .zip(&f)
                .position(|(a, f)| a.to_bits() != f.to_bits());
            let case = format!("optimizer {k} (apart: {apart}), {bucket_bytes}-byte buckets");
            check!(
                a.len() == f.len() && differ.is_none(),
                "{case}: backward_step differs from backward and step at {differ:?}"
            );
            // a parameter at a time when apart, else one step of all after the averaging
            let expected = if apart {
                vec![1; stepped * STEPS]
            } else {
                vec![stepped; STEPS]
            };
            check!(
                fused_opt.steps == expected,
                "{case}: the steps took {:?} gradients",
                fused_opt.steps
            );
            check!(
                tri!(grads(fused.module())) == tri!(grads(plain.module())),
                "{case}: backward_step left other gradients than backward"
            );
            check!(
                tri!(same_everywhere(world, &f)),
                "{case}: the replicas differ after backward_step"
            );
            let moved = max_diff(&f, &tri!(flat(&tri!(Net::new(1, HIDDEN)))));
            check!(moved > 1e-3, "{case} moved the parameters by {moved} only");
        }
    }
    Ok(())
}

fn a_collective_from_a_step_inside_backward_step_is_refused(world: &World) -> Check {
    let (odd, x, y, ddp) = tri!(one_rank_fails(world, 2));
    let loss = tri!(ddp.module().loss(&x, &y));
    let r = if world.rank() == odd {
        // an optimizer that formats the Ddp (readable while it averages) and then calls a
        // collective no other rank is calling at that point
        let mut meddling = Recording::new(Box::new(tri!(sgd(ddp.module().parameters()))), true);
        meddling.before = Box::new(|| {
            let _ = format!("{:?} {}", ddp, ddp.bucket_count());
            ddp.world()
                .all_reduce(&Tensor::scalar(1.0), ReduceOp::Sum)
                .map(drop)
        });
        ddp.backward_step(&loss, &mut meddling)
    } else {
        ddp.backward_step(&loss, &mut tri!(sgd(ddp.module().parameters())))
    };
    runtime_error_by_rank(
        world,
        &r,
        (
            odd,
            "World::all_reduce was called on rank",
            "failed on rank",
        ),
        &format!("while rank {odd}'s optimizer called a collective"),
    )?;
    // the refused collective sent nothing: the ranks are still in step
    let rank = tri!(Tensor::from_vec(vec![world.rank() as f64], shape![1]));
    let sum = tri!(tri!(world.all_reduce(&rank, ReduceOp::Sum)).to_vec::<f64>());
    let n = world.size() as f64;
    check!(
        sum == [n * (n - 1.0) / 2.0],
        "a sum after the refused collective: {sum:?}"
    );
    Ok(())
}

/// The setting of a check in which the last rank (`odd`) fails: this rank's share of batch
/// `step` and a `Ddp` of several buckets.
fn one_rank_fails(
    world: &World,
    step: usize,
) -> autograd_core::Result<(usize, Tensor, Tensor, Ddp<'_, Net>)> {
    let (x, y) = batch(step)?;
    let (x, y) = (share(world, &x)?, share(world, &y)?);
    let ddp = Ddp::new(world, Net::new(1, HIDDEN)?, DdpOptions { bucket_bytes: 64 })?;
    Ok((world.size() - 1, x, y, ddp))
}

/// `Ok` when `r` is `Error::Runtime` saying `odd_says` on rank `odd` and `others_say` on
/// every other rank; else a failure naming the rank, what it got, and `when`.
fn runtime_error_by_rank(
    world: &World,
    r: &autograd_core::Result<()>,
    (odd, odd_says, others_say): (usize, &str, &str),
    when: &str,
) -> Check {
    let why = if world.rank() == odd {
        odd_says
    } else {
        others_say
    };
    check!(
        matches!(r, Err(e) if e.kind() == ErrorKind::Runtime && e.to_string().contains(why)),
        "rank {} got {r:?} {when}",
        world.rank()
    );
    Ok(())
}

/// Whether `net`'s gradients are one process's on `(x, y)` from rank 0's initialisation: this
/// rank's own, not averaged.
fn grads_are_local(net: &Net, x: &Tensor, y: &Tensor) -> autograd_core::Result<bool> {
    let alone = Net::new(1, HIDDEN)?;
    alone.loss(x, y)?.backward()?;
    Ok(grads(net)? == grads(&alone)?)
}

fn backward_step_refuses_an_optimizer_of_other_parameters(world: &World) -> Check {
    let (odd, x, y, ddp) = tri!(one_rank_fails(world, 3));
    let before = tri!(flat(ddp.module()));
    let loss = tri!(ddp.module().loss(&x, &y));
    if world.rank() == odd {
        // the Ddp's first layer and a tensor of another model
        let stranger = tri!(Net::new(9, HIDDEN));
        let mut params = ddp.module().l1.parameters();
        params.push(stranger.l2.weight().clone());
        let mut opt = tri!(sgd(params));
        let r = ddp.backward_step(&loss, &mut opt);
        check!(
            matches!(&r, Err(e) if e.kind() == ErrorKind::Value && e.to_string().contains("not one of the Ddp's")),
            "the rank with a foreign optimizer got {r:?}"
        );
        check!(
            tri!(grads(ddp.module())).iter().all(|g| g.is_nan()),
            "the refused backward_step ran the backward"
        );
        check!(
            tri!(flat(&stranger)) == tri!(flat(&tri!(Net::new(9, HIDDEN)))),
            "the foreign tensor changed"
        );
    } else {
        let mut opt = tri!(sgd(ddp.module().parameters()));
        let r = ddp.backward_step(&loss, &mut opt);
        check!(
            matches!(&r, Err(e) if e.kind() == ErrorKind::Runtime && e.to_string().contains("1 of the")),
            "rank {} got {r:?} while rank {odd}'s optimizer was refused",
            world.rank()
        );
        check!(
            tri!(grads_are_local(ddp.module(), &x, &y)),
            "gradients were averaged although rank {odd}'s optimizer was refused"
        );
    }
    check!(
        tri!(flat(ddp.module())) == before,
        "a parameter was stepped although rank {odd}'s optimizer was refused"
    );
    // a backward failing on one rank: it fails on every rank, and no rank steps
    let loss = tri!(ddp.module().loss(&x, &y));
    let mut opt = tri!(sgd(ddp.module().parameters()));
    tri!(opt.zero_grad());
    if world.rank() == odd {
        // the graph is released: backward_step's own backward fails on this rank only
        tri!(loss.backward());
    }
    let r = ddp.backward_step(&loss, &mut opt);
    runtime_error_by_rank(
        world,
        &r,
        (odd, "retain_graph", "1 of the"),
        &format!("while rank {odd}'s backward failed"),
    )?;
    check!(
        tri!(flat(ddp.module())) == before,
        "a parameter was stepped although rank {odd}'s backward failed"
    );
    // the replicas go on with a right optimizer
    let mut opt = tri!(sgd(ddp.module().parameters()));
    tri!(opt.zero_grad());
    tri!(ddp.backward_step(&tri!(ddp.module().loss(&x, &y)), &mut opt));
    check!(
        tri!(same_everywhere(world, &tri!(flat(ddp.module())))),
        "the replicas differ after the next backward_step"
    );
    Ok(())
}

/// `Net` with every parameter a view of one flat buffer (as a flat-parameter model holds them).
fn net_in_one_buffer(seed: u64) -> autograd_core::Result<Net> {
    let sizes = [HIDDEN * FEATURES, HIDDEN, CLASSES * HIDDEN, CLASSES];
    let flat = Tensor::randn(shape![sizes.iter().sum::<usize>()], &mut Rng::new(seed))?;
    let mut at = 0;
    let mut next = |dims: &[usize]| -> autograd_core::Result<Tensor> {
        let n = dims.iter().product::<usize>();
        let t = flat.narrow(0, at, n)?.view(dims)?.detach();
        at += n;
        Ok(t)
    };
    Ok(Net {
        l1: Linear::from_parameters(next(&[HIDDEN, FEATURES])?, Some(next(&[HIDDEN])?))?,
        l2: Linear::from_parameters(next(&[CLASSES, HIDDEN])?, Some(next(&[CLASSES])?))?,
    })
}

fn parameters_in_one_buffer_step_at_once(world: &World) -> Check {
    let seed = 1 + world.rank() as u64;
    let plain = tri!(Ddp::new(
        world,
        tri!(net_in_one_buffer(seed)),
        DdpOptions { bucket_bytes: 40 }
    ));
    let fused = tri!(Ddp::new(
        world,
        tri!(net_in_one_buffer(seed)),
        DdpOptions { bucket_bytes: 40 }
    ));
    let mut plain_opt = tri!(sgd(plain.module().parameters()));
    let mut fused_opt = Recording::new(Box::new(tri!(sgd(fused.module().parameters()))), true);
    tri!(train_both(
        world,
        (&plain, &mut plain_opt),
        (&fused, &mut fused_opt)
    ));
    // parameters that share storage are stepped together, after the averaging
    check!(
        fused_opt.steps == vec![4; STEPS],
        "parameters in one buffer took steps of {:?} gradients",
        fused_opt.steps
    );
    let (a, f) = (tri!(flat(plain.module())), tri!(flat(fused.module())));
    check!(
        a.iter().zip(&f).all(|(a, f)| a.to_bits() == f.to_bits()),
        "parameters in one buffer: backward_step differs from backward and step"
    );
    Ok(())
}

/// A model whose two layers are one: the same weight and bias, held twice.
#[derive(Module)]
struct Tied {
    first: Linear,
    again: Linear,
}

fn tied_parameters_average_and_step_once(world: &World) -> Check {
    let tied = |seed: u64| -> autograd_core::Result<Tied> {
        let l = Linear::new(FEATURES, FEATURES, true, &mut Rng::new(seed))?;
        let (w, b) = (l.weight().clone(), l.bias().cloned());
        Ok(Tied {
            first: Linear::from_parameters(w.clone(), b.clone())?,
            again: Linear::from_parameters(w, b)?,
        })
    };
    let loss = |t: &Tied, x: &Tensor| -> autograd_core::Result<Tensor> {
        let h = t.again.forward(&relu(&t.first.forward(x)?)?)?;
        autograd_core::ops::mean(&mul(&h, &h)?)
    };
    // the optimizer takes each tensor once
    let once = |t: &Tied| t.first.parameters();
    // one process on the global batches
    let reference = tri!(tied(1));
    let mut opt = tri!(sgd(once(&reference)));
    for step in 0..STEPS {
        let (x, _) = tri!(batch(step));
        tri!(opt.zero_grad());
        tri!(tri!(loss(&reference, &x)).backward());
        tri!(opt.step());
    }
    let ddp = tri!(Ddp::new(
        world,
        tri!(tied(1 + world.rank() as u64)),
        DdpOptions { bucket_bytes: 1 }
    ));
    check!(
        ddp.bucket_count() == 2,
        "a tied weight and bias went in {} one-tensor buckets",
        ddp.bucket_count()
    );
    let mut opt = tri!(sgd(once(ddp.module())));
    for step in 0..STEPS {
        let (x, _) = tri!(batch(step));
        tri!(opt.zero_grad());
        tri!(ddp.backward_step(&tri!(loss(ddp.module(), &tri!(share(world, &x)))), &mut opt));
    }
    let got = tri!(flat(&ddp.module().first));
    let d = max_diff(&got, &tri!(flat(&reference.first)));
    check!(d <= 1e-6, "the tied model differs from one process by {d}");
    check!(
        tri!(same_everywhere(world, &got)),
        "the tied replicas differ"
    );
    if world.size() > 1 {
        // the same names and shapes, but untied on one rank: refused on every rank
        let model = if world.rank() == world.size() - 1 {
            let mut rng = Rng::new(1);
            Tied {
                first: tri!(Linear::new(FEATURES, FEATURES, true, &mut rng)),
                again: tri!(Linear::new(FEATURES, FEATURES, true, &mut rng)),
            }
        } else {
            tri!(tied(1))
        };
        let r = Ddp::new(world, model, DdpOptions::default());
        check!(
            matches!(&r, Err(e) if e.kind() == ErrorKind::Value && e.to_string().contains("tying")),
            "rank {}: models tied differently gave {:?}",
            world.rank(),
            r.err()
        );
    }
    Ok(())
}

/// The gradients of every parameter, flattened (NaN where there is none).
fn grads(module: &dyn Module) -> autograd_core::Result<Vec<f32>> {
    let mut all = Vec::new();
    for p in module.parameters() {
        match p.grad()? {
            Some(g) => all.extend(g.to_vec::<f32>()?),
            None => all.extend(vec![f32::NAN; p.size()]),
        }
    }
    Ok(all)
}

fn no_sync_accumulation_equals_synchronous(world: &World) -> Check {
    let (x, y) = tri!(batch(0));
    let (x, y) = (tri!(share(world, &x)), tri!(share(world, &y)));
    let half = x.dims()[0] / 2;
    let micro = |k: usize| -> autograd_core::Result<(Tensor, Tensor)> {
        // contiguous: fresh tensors outside any graph, reused by several models
        Ok((
            x.narrow(0, k * half, half)?.contiguous()?,
            y.narrow(0, k * half, half)?.contiguous()?,
        ))
    };
    // synchronous: both micro-batches averaged
    let sync = tri!(Ddp::new(
        world,
        tri!(Net::new(1, HIDDEN)),
        DdpOptions::default()
    ));
    for k in 0..2 {
        let (a, b) = tri!(micro(k));
        tri!(sync.backward(&tri!(sync.module().loss(&a, &b))));
    }
    let expected = tri!(grads(sync.module()));
    // accumulated: the first only locally
    let mut acc = tri!(Ddp::new(
        world,
        tri!(Net::new(1, HIDDEN)),
        DdpOptions::default()
    ));
    let (a, b) = tri!(micro(0));
    let local = tri!(acc.no_sync(|ddp| -> autograd_core::Result<Vec<f32>> {
        ddp.backward(&ddp.module().loss(&a, &b)?)?;
        grads(ddp.module())
    }));
    let alone = tri!(Net::new(1, HIDDEN));
    tri!(alone.loss(&a, &b).and_then(|l| l.backward()));
    check!(
        local == tri!(grads(&alone)),
        "no_sync averaged the gradients"
    );
    let (a, b) = tri!(micro(1));
    tri!(acc.backward(&tri!(acc.module().loss(&a, &b))));
    let got = tri!(grads(acc.module()));
    let d = max_diff(&got, &expected);
    check!(
        d <= 1e-6,
        "no_sync accumulation differs from synchronous by {d}"
    );
    check!(
        tri!(same_everywhere(world, &got)),
        "accumulated gradients differ across ranks"
    );
    Ok(())
}

fn functional_grads_average_like_backward(world: &World) -> Check {
    let (x, y) = tri!(batch(1));
    let (x, y) = (tri!(share(world, &x)), tri!(share(world, &y)));
    let ddp = tri!(Ddp::new(
        world,
        tri!(Net::new(1, HIDDEN)),
        DdpOptions { bucket_bytes: 64 }
    ));
    let params = ddp.module().parameters();
    let loss = tri!(ddp.module().loss(&x, &y));
    let inputs: Vec<&Tensor> = params.iter().collect();
    let ones = tri!(loss.ones_like());
    let found = tri!(autograd_core::grad(
        &loss,
        &inputs,
        &ones,
        autograd_core::GradOptions::default()
    ));
    let mut gs: Vec<Tensor> = found.into_iter().flatten().collect();
    check!(
        gs.len() == params.len(),
        "grad returned {} of {} gradients",
        gs.len(),
        params.len()
    );
    tri!(ddp.average_grads(&mut gs));
    tri!(ddp.backward(&tri!(ddp.module().loss(&x, &y))));
    let mut functional = Vec::new();
    for g in &gs {
        functional.extend(tri!(g.to_vec::<f32>()));
    }
    let d = max_diff(&functional, &tri!(grads(ddp.module())));
    check!(
        d == 0.0,
        "average_grads differs from backward's averaging by {d}"
    );
    if world.size() > 1 {
        let mut wrong = if world.rank() == 1 {
            gs[..1].to_vec()
        } else {
            gs.clone()
        };
        let err = ddp.average_grads(&mut wrong);
        check!(
            matches!(&err, Err(e) if e.kind() == ErrorKind::Value),
            "mismatched gradient lists gave {err:?}"
        );
    }
    Ok(())
}

/// Element `i` of rank `r`'s gradients in the `average_grads` checks: integers, so that every
/// rank's sum is exact whatever order the summing rank adds in.
fn value(i: usize, r: usize) -> f32 {
    ((i * 31 + r * 17) % 4096) as f32
}

/// The mean over the world's ranks of element `i`.
fn mean(world: &World, i: usize) -> f32 {
    let n = world.size();
    (0..n).map(|r| value(i, r)).sum::<f32>() / n as f32
}

/// This rank's values as a Float32 tensor of `dims`.
fn ranked_gradient(world: &World, dims: &[usize]) -> autograd_core::Result<Tensor> {
    let len = dims.iter().product::<usize>();
    Tensor::from_vec(
        (0..len)
            .map(|i| value(i, world.rank()))
            .collect::<Vec<f32>>(),
        dims,
    )
}

/// A `Ddp` to average gradients with.
fn averager(world: &World) -> autograd_core::Result<Ddp<'_, Net>> {
    Ddp::new(world, Net::new(1, HIDDEN)?, DdpOptions::default())
}

/// `average_grads` of gradients laid out every way, each spanning several of the blocks a
/// rank sums its share in: a transposed view is averaged in place (its base holds the means),
/// a stride-0 broadcast is replaced by a fresh tensor of the means (its row is left alone),
/// and a compact one is averaged in place.
fn average_grads_of_views_in_place_or_fresh(world: &World) -> Check {
    let mean = |i| mean(world, i);
    let (rows, cols) = (200, 300);
    let ddp = tri!(averager(world));
    let base = tri!(ranked_gradient(world, &[rows, cols]));
    let row = tri!(ranked_gradient(world, &[1, 50]));
    let flat = tri!(ranked_gradient(world, &[40_000]));
    let mut gs = vec![
        tri!(base.transpose(0, 1)),
        tri!(row.broadcast_to(&[40usize, 50])),
        flat.clone(),
    ];
    tri!(ddp.average_grads(&mut gs));
    let want: Vec<f32> = (0..rows * cols).map(mean).collect();
    check!(
        tri!(base.to_vec::<f32>()) == want,
        "the transposed view's base does not hold the means"
    );
    let want_t: Vec<f32> = (0..cols * rows)
        .map(|k| mean((k % rows) * cols + k / rows))
        .collect();
    check!(
        tri!(gs[0].to_vec::<f32>()) == want_t,
        "the transposed view's logical values are not the means"
    );
    let want_b: Vec<f32> = (0..40 * 50).map(|k| mean(k % 50)).collect();
    check!(
        tri!(gs[1].to_vec::<f32>()) == want_b,
        "the broadcast gradient's values are not the means"
    );
    check!(
        tri!(row.to_vec::<f32>())
            == (0..50)
                .map(|i| value(i, world.rank()))
                .collect::<Vec<f32>>(),
        "the broadcast gradient's row was written"
    );
    check!(
        tri!(flat.to_vec::<f32>()) == (0..40_000).map(mean).collect::<Vec<f32>>(),
        "the compact gradient does not hold the means in place"
    );
    Ok(())
}

/// `average_grads` of two views of one storage (the tensor and its transpose) beside another
/// gradient: on 2 ranks rank 1 sums both views, and the transpose's means are written whole
/// before its later blocks read the tensor, so they must read the values it was given. Every
/// element ends as the mean of the ranks' values, not a mean of means.
fn average_grads_of_two_views_of_one_storage(world: &World) -> Check {
    let (rows, cols, other) = (100, 200, 40_000);
    let ddp = tri!(averager(world));
    let base = tri!(ranked_gradient(world, &[rows, cols]));
    let apart = tri!(ranked_gradient(world, &[other]));
    // the stream runs last gradient first: `apart`, then the transpose, then `base`
    let mut gs = vec![base.clone(), tri!(base.transpose(0, 1)), apart.clone()];
    tri!(ddp.average_grads(&mut gs));
    for (what, t, len) in [
        ("the shared storage", &base, rows * cols),
        ("the other gradient", &apart, other),
    ] {
        let got = tri!(t.to_vec::<f32>());
        let wrong = (0..len).find(|&i| got[i] != mean(world, i));
        check!(
            wrong.is_none(),
            "element {wrong:?} of {what} is not the mean of the ranks' values"
        );
    }
    Ok(())
}

/// A two-headed model whose second head only rank 0 uses.
#[derive(Module)]
struct TwoHeads {
    a: Linear,
    b: Linear,
}

fn missing_gradient_counts_as_zeros(world: &World) -> Check {
    let mut rng = Rng::new(5);
    let net = TwoHeads {
        a: tri!(Linear::new(FEATURES, 2, false, &mut rng)),
        b: tri!(Linear::new(FEATURES, 2, false, &mut rng)),
    };
    let ddp = tri!(Ddp::new(world, net, DdpOptions { bucket_bytes: 1 }));
    let x = tri!(Tensor::randn(shape![3, FEATURES], &mut Rng::new(6)));
    let out = |head: &Linear| head.forward(&x).and_then(|t| t.sum());
    let loss = if world.rank() == 0 {
        tri!(out(&ddp.module().b))
    } else {
        tri!(out(&ddp.module().a))
    };
    tri!(ddp.backward(&loss));
    let gb = tri!(tri!(ddp.module().b.weight().grad()).ok_or("head b has no gradient"));
    // d sum(x W^T) / dW: every row is the column sums of x (on rank 0; zeros elsewhere)
    let xs = tri!(x.to_vec::<f32>());
    let col: Vec<f32> = (0..FEATURES)
        .map(|j| (0..3).map(|i| xs[i * FEATURES + j]).sum())
        .collect();
    let expected: Vec<f32> = (0..2)
        .flat_map(|_| col.iter().map(|v| v / world.size() as f32))
        .collect();
    let d = max_diff(&tri!(gb.to_vec::<f32>()), &expected);
    check!(d <= 1e-6, "the gradient only rank 0 had is off by {d}");
    let ga = tri!(ddp.module().a.weight().grad());
    check!(
        ga.is_some() == (world.size() > 1),
        "head a's gradient: {ga:?}"
    );
    if let Some(ga) = ga {
        // the other ranks' (size - 1) equal gradients, averaged over every rank
        let others = (world.size() - 1) as f32 / world.size() as f32;
        let expected: Vec<f32> = (0..2)
            .flat_map(|_| col.iter().map(|v| v * others))
            .collect();
        let d = max_diff(&tri!(ga.to_vec::<f32>()), &expected);
        check!(d <= 1e-6, "the gradient rank 0 lacked is off by {d}");
    }
    Ok(())
}

fn a_different_model_is_refused_on_every_rank(world: &World) -> Check {
    if world.size() == 1 {
        return Ok(());
    }
    let odd = world.size() - 1;
    let hidden = if world.rank() == odd {
        HIDDEN + 1
    } else {
        HIDDEN
    };
    match Ddp::new(world, tri!(Net::new(1, hidden)), DdpOptions::default()) {
        Err(e) if e.kind() == ErrorKind::Value => {
            let text = e.to_string();
            check!(
                text.contains(&format!("ranks {odd} disagree")),
                "the error does not name rank {odd}: {text}"
            );
        }
        other => return Err(format!("a different model on rank {odd} gave {other:?}")),
    }
    let bucket_bytes = if world.rank() == odd { 1 } else { 1 << 20 };
    let other = Ddp::new(
        world,
        tri!(Net::new(1, HIDDEN)),
        DdpOptions { bucket_bytes },
    );
    check!(
        matches!(&other, Err(e) if e.kind() == ErrorKind::Value),
        "different bucket sizes gave {other:?}"
    );
    Ok(())
}

/// A module with a Float32 parameter and Float64 and Int64 buffers.
#[derive(Module)]
struct WithBuffers {
    weight: Tensor,
    #[module(buffer)]
    stats: Tensor,
    #[module(buffer)]
    steps: Tensor,
}

fn parameters_and_buffers_come_from_rank_0_in_place(world: &World) -> Check {
    let r = world.rank() as f64;
    let weight = tri!(Tensor::from_vec(vec![r as f32, 1.0 + r as f32], shape![2]));
    // a transposed Float64 buffer: written through its own layout
    let stats = tri!(tri!(Tensor::from_vec(
        vec![r, 2.0 * r, 3.0 * r, 4.0 * r, 5.0 * r, 6.0 * r],
        shape![2, 3]
    ))
    .transpose(0, 1));
    let steps = tri!(Tensor::from_vec(vec![7 + world.rank() as i64], shape![1]));
    let handles = (weight.clone(), stats.clone(), steps.clone());
    let ddp = tri!(Ddp::new(
        world,
        WithBuffers {
            weight,
            stats,
            steps
        },
        DdpOptions::default()
    ));
    check!(
        tri!(handles.0.to_vec::<f32>()) == [0.0, 1.0],
        "weight {:?}",
        handles.0.to_vec::<f32>()
    );
    check!(
        tri!(handles.1.to_vec::<f64>()) == [0.0; 6],
        "stats {:?}",
        handles.1.to_vec::<f64>()
    );
    check!(
        tri!(handles.2.to_vec::<i64>()) == [7],
        "steps {:?}",
        handles.2.to_vec::<i64>()
    );
    check!(
        tri!(ddp.module().steps.to_vec::<i64>()) == [7],
        "the module's own handle disagrees"
    );
    check!(
        handles.1.dims() == [3, 2],
        "the buffer's shape changed to {:?}",
        handles.1.dims()
    );
    Ok(())
}

fn a_failed_backward_fails_on_every_rank(world: &World) -> Check {
    let (odd, x, y, ddp) = tri!(one_rank_fails(world, 2));
    let loss = tri!(ddp.module().loss(&x, &y));
    if world.rank() == odd {
        // the graph is released: the second backward fails on this rank only
        tri!(loss.backward());
        let own = tri!(grads(ddp.module()));
        let r = ddp.backward(&loss);
        check!(
            matches!(&r, Err(e) if e.kind() == ErrorKind::Runtime && e.to_string().contains("retain_graph")),
            "the failing rank got {r:?}"
        );
        check!(
            tri!(grads(ddp.module())) == own,
            "the failing rank's gradients changed"
        );
    } else {
        let r = ddp.backward(&loss);
        check!(
            matches!(&r, Err(e) if e.kind() == ErrorKind::Runtime && e.to_string().contains("1 of the")),
            "rank {} got {r:?} while rank {odd} failed",
            world.rank()
        );
        check!(
            tri!(grads_are_local(ddp.module(), &x, &y)),
            "gradients were averaged although rank {odd} failed"
        );
    }
    // the replicas go on: the next step averages again
    let again = tri!(ddp.module().loss(&x, &y));
    tri!(ddp.backward(&again));
    Ok(())
}

/// Rank-dependent values: `f(i + 100 * rank)` for `i` in `0..n`.
fn ranked<T>(world: &World, n: usize, f: impl Fn(f64) -> T) -> Vec<T> {
    (0..n)
        .map(|i| f(i as f64 + 100.0 * world.rank() as f64))
        .collect()
}

fn collectives_on_views_float32_and_float64(world: &World) -> Check {
    let size = world.size() as f64;
    let ranks: Vec<f64> = (0..world.size()).map(|r| r as f64).collect();
    // a transposed (non-contiguous) Float32 view: logical [j, i] = base[i, j]
    let base = tri!(Tensor::from_vec(
        ranked(world, 6, |v| v as f32),
        shape![2, 3]
    ));
    let t = tri!(base.transpose(0, 1));
    let logical = |rank: f64| -> Vec<f64> {
        (0..3)
            .flat_map(|j| (0..2).map(move |i| f64::from(i * 3 + j) + 100.0 * rank))
            .collect()
    };
    let sum: Vec<f64> = (0..6)
        .map(|k| ranks.iter().map(|&r| logical(r)[k]).sum())
        .collect();
    let got = tri!(tri!(world.all_reduce(&t, ReduceOp::Sum)).to_vec::<f32>());
    check!(
        got.iter().zip(&sum).all(|(g, s)| f64::from(*g) == *s),
        "sum of a transposed view: {got:?}, want {sum:?}"
    );
    let mean = tri!(world.all_reduce(&t, ReduceOp::Mean));
    check!(mean.dims() == [3, 2], "mean has shape {:?}", mean.dims());
    let got = tri!(mean.to_vec::<f32>());
    check!(
        got.iter()
            .zip(&sum)
            .all(|(g, s)| (f64::from(*g) - s / size).abs() < 1e-4),
        "mean: {got:?}"
    );
    let top = logical(size - 1.0);
    let got = tri!(tri!(world.all_reduce(&t, ReduceOp::Max)).to_vec::<f32>());
    check!(
        got.iter().zip(&top).all(|(g, s)| f64::from(*g) == *s),
        "max: {got:?}"
    );
    // a broadcast (stride-0) Float64 view: [4, 3] from one row [1, 3]
    let row = tri!(Tensor::from_vec(
        ranked(world, 3, |v| v + 0.5),
        shape![1, 3]
    ));
    let wide = tri!(row.broadcast_to(&[4usize, 3]));
    let row_of = |rank: f64| -> Vec<f64> {
        (0..4)
            .flat_map(|_| (0..3).map(move |j| f64::from(j) + 0.5 + 100.0 * rank))
            .collect()
    };
    let got = tri!(tri!(world.all_reduce(&wide, ReduceOp::Sum)).to_vec::<f64>());
    let want: Vec<f64> = (0..12)
        .map(|k| ranks.iter().map(|&r| row_of(r)[k]).sum())
        .collect();
    check!(
        got == want,
        "sum of a broadcast Float64 view: {got:?}, want {want:?}"
    );
    let gathered = tri!(world.all_gather(&wide));
    check!(
        gathered.dims() == [world.size(), 4, 3],
        "all_gather shape {:?}",
        gathered.dims()
    );
    let got = tri!(gathered.to_vec::<f64>());
    let want: Vec<f64> = ranks.iter().flat_map(|&r| row_of(r)).collect();
    check!(got == want, "all_gather of a broadcast view: {got:?}");
    let last = world.size() - 1;
    let got = tri!(tri!(world.broadcast(&t, last)).to_vec::<f32>());
    check!(
        got.iter()
            .zip(logical(last as f64))
            .all(|(g, s)| f64::from(*g) == s),
        "broadcast from rank {last}: {got:?}"
    );
    let got = tri!(tri!(world.broadcast(&wide, 0)).to_vec::<f64>());
    check!(
        got == row_of(0.0),
        "broadcast of a Float64 view from rank 0: {got:?}"
    );
    // Int64 sums; its mean is a type error on every rank
    let ints = tri!(Tensor::from_vec(ranked(world, 2, |v| v as i64), shape![2]));
    let got = tri!(tri!(world.all_reduce(&ints, ReduceOp::Sum)).to_vec::<i64>());
    let want: Vec<i64> = (0..2)
        .map(|i| ranks.iter().map(|&r| i + 100 * r as i64).sum())
        .collect();
    check!(got == want, "Int64 sum: {got:?}");
    let mean = world.all_reduce(&ints, ReduceOp::Mean);
    check!(
        matches!(&mean, Err(e) if e.kind() == ErrorKind::Type),
        "Int64 mean gave {mean:?}"
    );
    let bools = tri!(Tensor::zeros(shape![2], &DType::Bool));
    let refused = world.all_reduce(&bools, ReduceOp::Sum);
    check!(
        matches!(&refused, Err(e) if e.kind() == ErrorKind::Type),
        "Bool all_reduce gave {refused:?}"
    );
    let far = world.broadcast(&t, world.size());
    check!(
        matches!(&far, Err(e) if e.kind() == ErrorKind::Value),
        "a broadcast from a rank past the end gave {far:?}"
    );
    Ok(())
}

fn disagreeing_collectives_fail_on_every_rank(world: &World) -> Check {
    if world.size() == 1 {
        return Ok(());
    }
    let odd = world.rank() == 1;
    let t = tri!(Tensor::zeros(
        if odd { shape![2, 4] } else { shape![4, 2] },
        &DType::Float32
    ));
    let r = world.all_reduce(&t, ReduceOp::Sum);
    check!(
        matches!(&r, Err(e) if e.kind() == ErrorKind::Value && e.to_string().contains("ranks 1 disagree")),
        "shapes [2, 4] against [4, 2]: {r:?}"
    );
    let dtype = if odd { DType::Float64 } else { DType::Float32 };
    let t = tri!(Tensor::zeros(shape![3], &dtype));
    let r = world.all_gather(&t);
    check!(
        matches!(&r, Err(e) if e.kind() == ErrorKind::Value),
        "Float64 against Float32: {r:?}"
    );
    let t = tri!(Tensor::zeros(shape![3], &DType::Float32));
    let r = world.broadcast(&t, usize::from(odd));
    check!(
        matches!(&r, Err(e) if e.kind() == ErrorKind::Value),
        "different roots: {r:?}"
    );
    let op = if odd { ReduceOp::Max } else { ReduceOp::Sum };
    let r = world.all_reduce(&t, op);
    check!(
        matches!(&r, Err(e) if e.kind() == ErrorKind::Value),
        "different ops: {r:?}"
    );
    // and the world still works afterwards
    let one = tri!(Tensor::from_vec(vec![1.0f32], shape![1]));
    let r = tri!(tri!(world.all_reduce(&one, ReduceOp::Sum)).to_vec::<f32>());
    check!(
        r == [world.size() as f32],
        "all_reduce after the refusals: {r:?}"
    );
    Ok(())
}

fn checkpoints_save_on_rank_0_and_load_everywhere(world: &World) -> Check {
    // one path for every rank: rank 0's process id
    let pid = tri!(Tensor::from_vec(
        vec![i64::from(std::process::id())],
        shape![1]
    ));
    let pid = tri!(tri!(world.broadcast(&pid, 0)).to_vec::<i64>())[0];
    let path = std::env::temp_dir().join(format!("ddp-checkpoint-{pid}.safetensors"));
    let trained = tri!(Ddp::new(
        world,
        tri!(Net::new(3, HIDDEN)),
        DdpOptions::default()
    ));
    tri!(trained.save(&path));
    check!(
        path.exists(),
        "{} is missing after save returned",
        path.display()
    );
    let mut fresh = tri!(Ddp::new(
        world,
        tri!(Net::new(4, HIDDEN)),
        DdpOptions::default()
    ));
    check!(
        tri!(flat(fresh.module())) != tri!(flat(trained.module())),
        "the fresh model already equals the saved one"
    );
    tri!(fresh.load(&path));
    check!(
        tri!(flat(fresh.module())) == tri!(flat(trained.module())),
        "the loaded parameters differ from the saved"
    );
    world.barrier();
    if world.rank() == 0 {
        std::fs::remove_file(&path).map_err(|e| e.to_string())?;
    }
    world.barrier();
    let missing = fresh.load(&path);
    check!(
        matches!(&missing, Err(e) if e.kind() == ErrorKind::Runtime),
        "loading a missing file gave {missing:?}"
    );
    // a file missing on the last rank only: every rank refuses, and no rank's model changes
    tri!(trained.save(&path));
    let last = world.size() - 1;
    let mine = if world.rank() == last && last > 0 {
        path.with_extension("absent")
    } else {
        path.clone()
    };
    let mut other = tri!(Ddp::new(
        world,
        tri!(Net::new(5, HIDDEN)),
        DdpOptions::default()
    ));
    let kept = tri!(flat(other.module()));
    let refused = other.load(&mine);
    if last > 0 {
        check!(
            refused.is_err(),
            "a load failing on rank {last} succeeded here"
        );
        check!(
            tri!(flat(other.module())) == kept,
            "a load refused on rank {last} changed this rank's model"
        );
    } else {
        check!(refused.is_ok(), "loading on one rank failed: {refused:?}");
    }
    world.barrier();
    if world.rank() == 0 {
        std::fs::remove_file(&path).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn jumped_generators_differ_by_rank(world: &World) -> Check {
    let mut rng = Rng::new(11);
    for _ in 0..world.rank() {
        rng.jump();
    }
    let draws: Vec<i64> = (0..4).map(|_| rng.next_u64() as i64).collect();
    let all =
        tri!(tri!(world.all_gather(&tri!(Tensor::from_vec(draws, shape![4])))).to_vec::<i64>());
    for a in 0..world.size() {
        for b in 0..a {
            check!(
                all[a * 4..a * 4 + 4] != all[b * 4..b * 4 + 4],
                "ranks {a} and {b} drew the same numbers"
            );
        }
    }
    Ok(())
}

/// A sum larger than a shared-memory slot (at most 8 MiB on 2 ranks) goes through in pieces,
/// each element summed exactly once; Float64 and Int64 the same way.
fn sums_larger_than_a_slot_arrive_whole(world: &World) -> Check {
    let n = 3_000_001; // 12 MB of Float32, not a multiple of any piece or share
    let rank = world.rank();
    let value = |i: usize, r: usize| ((i * 7 + r * 13) % 1024) as f32;
    let t = tri!(Tensor::from_vec(
        (0..n).map(|i| value(i, rank)).collect::<Vec<f32>>(),
        shape![n]
    ));
    let got = tri!(tri!(world.all_reduce(&t, ReduceOp::Sum)).to_vec::<f32>());
    let wrong = (0..n).find(|&i| got[i] != (0..world.size()).map(|r| value(i, r)).sum::<f32>());
    check!(wrong.is_none(), "element {wrong:?} of a 12 MB sum is wrong");
    let m = 1_500_007;
    let wide = tri!(Tensor::from_vec(
        (0..m)
            .map(|i| f64::from(value(i, rank)) + 0.25)
            .collect::<Vec<f64>>(),
        shape![m]
    ));
    let got = tri!(tri!(world.all_reduce(&wide, ReduceOp::Mean)).to_vec::<f64>());
    let size = world.size() as f64;
    let wrong = (0..m).find(|&i| {
        let sum: f64 = (0..world.size())
            .map(|r| f64::from(value(i, r)) + 0.25)
            .sum();
        got[i] != sum / size
    });
    check!(
        wrong.is_none(),
        "element {wrong:?} of a 12 MB Float64 mean is wrong"
    );
    Ok(())
}

/// Ranks that ask for different shared-memory settings all get `Error::Value`, and stay in
/// step: a sum right after still works.
fn the_shared_memory_setting_must_agree(world: &World) -> Check {
    if world.size() < 2 {
        return Ok(());
    }
    let before = tri!(Tensor::from_vec(vec![1.0f32; 4], shape![4]));
    let r = world.use_shared_memory(world.rank() != 1);
    check!(
        matches!(&r, Err(e) if e.kind() == ErrorKind::Value && e.to_string().contains("ranks 1 disagree")),
        "different settings gave {r:?}"
    );
    // still in step: a sum works
    let got = tri!(tri!(world.all_reduce(&before, ReduceOp::Sum)).to_vec::<f32>());
    check!(
        got == vec![world.size() as f32; 4],
        "a sum after the refused setting: {got:?}"
    );
    Ok(())
}

fn the_world_is_initialised_once(_: &World) -> Check {
    let again = World::init();
    check!(
        matches!(&again, Err(e) if e.kind() == ErrorKind::Runtime),
        "a second World::init gave {again:?}"
    );
    Ok(())
}

type Named = (&'static str, fn(&World) -> Check);

const CHECKS: [Named; 22] = [
    (
        "the_world_is_initialised_once",
        the_world_is_initialised_once,
    ),
    (
        "collectives_on_views_float32_and_float64",
        collectives_on_views_float32_and_float64,
    ),
    (
        "disagreeing_collectives_fail_on_every_rank",
        disagreeing_collectives_fail_on_every_rank,
    ),
    (
        "replicas_equal_each_other_and_one_process",
        replicas_equal_each_other_and_one_process,
    ),
    (
        "bucket_boundaries_do_not_change_results",
        bucket_boundaries_do_not_change_results,
    ),
    (
        "backward_step_equals_backward_then_step",
        backward_step_equals_backward_then_step,
    ),
    (
        "backward_step_refuses_an_optimizer_of_other_parameters",
        backward_step_refuses_an_optimizer_of_other_parameters,
    ),
    (
        "a_collective_from_a_step_inside_backward_step_is_refused",
        a_collective_from_a_step_inside_backward_step_is_refused,
    ),
    (
        "tied_parameters_average_and_step_once",
        tied_parameters_average_and_step_once,
    ),
    (
        "parameters_in_one_buffer_step_at_once",
        parameters_in_one_buffer_step_at_once,
    ),
    (
        "no_sync_accumulation_equals_synchronous",
        no_sync_accumulation_equals_synchronous,
    ),
    (
        "functional_grads_average_like_backward",
        functional_grads_average_like_backward,
    ),
    (
        "average_grads_of_views_in_place_or_fresh",
        average_grads_of_views_in_place_or_fresh,
    ),
    (
        "average_grads_of_two_views_of_one_storage",
        average_grads_of_two_views_of_one_storage,
    ),
    (
        "missing_gradient_counts_as_zeros",
        missing_gradient_counts_as_zeros,
    ),
    (
        "a_different_model_is_refused_on_every_rank",
        a_different_model_is_refused_on_every_rank,
    ),
    (
        "checkpoints_save_on_rank_0_and_load_everywhere",
        checkpoints_save_on_rank_0_and_load_everywhere,
    ),
    (
        "jumped_generators_differ_by_rank",
        jumped_generators_differ_by_rank,
    ),
    (
        "parameters_and_buffers_come_from_rank_0_in_place",
        parameters_and_buffers_come_from_rank_0_in_place,
    ),
    (
        "a_failed_backward_fails_on_every_rank",
        a_failed_backward_fails_on_every_rank,
    ),
    (
        "sums_larger_than_a_slot_arrive_whole",
        sums_larger_than_a_slot_arrive_whole,
    ),
    (
        "the_shared_memory_setting_must_agree",
        the_shared_memory_setting_must_agree,
    ),
];

fn main() -> ExitCode {
    let world = match World::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("cannot initialise MPI: {e}");
            return ExitCode::FAILURE;
        }
    };
    // every check twice: sums through the ranks' shared memory (the default on one machine),
    // then through the MPI library's all-reduces, as across machines
    for shared in [true, false] {
        let mode = if shared {
            "shared memory"
        } else {
            "MPI messages"
        };
        for (name, run) in CHECKS {
            let outcome = world
                .use_shared_memory(shared)
                .map_err(|e| e.to_string())
                .and_then(|()| run(&world));
            if let Err(why) = outcome {
                eprintln!(
                    "FAILED {name} ({mode}) on rank {} of {}: {why}",
                    world.rank(),
                    world.size()
                );
                // ends the job: mpirun stops the other ranks when one exits without finalising
                std::process::exit(1);
            }
            if world.rank() == 0 {
                println!("ok {name} ({} ranks, {mode})", world.size());
            }
        }
    }
    ExitCode::SUCCESS
}
