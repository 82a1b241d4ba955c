//! Optimizers and schedules of issue 38 item 8 against PyTorch 2.15's numbers
//! (`tests/fixtures/optim/optim.txt`, printed by `gen_optim.py` beside it): Adam, AdamW's
//! AMSGrad, RMSprop, Adagrad, SGD's and Adam's `maximize`, parameter groups, every schedule's
//! rate sequence and ReduceLROnPlateau on a scripted metric; state files that round-trip and
//! resume bit for bit; bad configs and steps that are `Error::Value` and change nothing.

use std::collections::HashMap;

use autograd_core::{ErrorKind, Result, Tensor};
use autograd_ops::optim::schedule::{
    Anneal, LinearLr, LinearLrConfig, LrSchedule, OneCycleLr, OneCycleLrConfig, PlateauMode,
    ReduceLrOnPlateau, ReduceLrOnPlateauConfig, StepLr, StepLrConfig, WarmupCosineLr,
    WarmupCosineLrConfig,
};
use autograd_ops::{
    Adagrad, AdagradConfig, Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, ParamGroup, RmsProp,
    RmsPropConfig, Sgd, SgdConfig,
};
use autograd_tests::{t, vals};

const FIXTURE: &str = include_str!("../fixtures/optim/optim.txt");

fn floats(text: &str) -> Vec<f64> {
    text.split_whitespace()
        .map(|v| v.parse().expect("a float"))
        .collect()
}

/// The fixture's tensors by name: dims and values.
fn tensors() -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    FIXTURE
        .lines()
        .filter_map(|l| l.strip_prefix("tensor|"))
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            let dims = f[1]
                .split_whitespace()
                .map(|d| d.parse().unwrap())
                .collect();
            let values = floats(f[2]).into_iter().map(|v| v as f32).collect();
            (f[0].to_string(), (dims, values))
        })
        .collect()
}

/// The fixed problem: fresh parameters `p0`, `p1` at their initial values, targets, weights.
struct Problem {
    params: [Tensor; 2],
    targets: [Vec<f32>; 2],
    weights: [Vec<f32>; 2],
}

impl Problem {
    fn new() -> Problem {
        let ts = tensors();
        let make = |name: &str| t(&ts[name].1, &ts[name].0);
        Problem {
            params: [make("p0"), make("p1")],
            targets: [ts["t0"].1.clone(), ts["t1"].1.clone()],
            weights: [ts["w0"].1.clone(), ts["w1"].1.clone()],
        }
    }

    /// `2 * (p - t) * w` in f32, as the generator computes it.
    fn grads(&self) -> Vec<Option<Tensor>> {
        (0..2)
            .map(|k| {
                let p = &self.params[k];
                let g: Vec<f32> = vals(p)
                    .iter()
                    .zip(&self.targets[k])
                    .zip(&self.weights[k])
                    .map(|((p, t), w)| 2.0 * (p - t) * w)
                    .collect();
                Some(t(&g, &p.dims()))
            })
            .collect()
    }

    fn names(&self) -> Vec<(String, Tensor)> {
        vec![
            ("p0".to_string(), self.params[0].clone()),
            ("p1".to_string(), self.params[1].clone()),
        ]
    }
}

fn kv(text: &str, sep: char) -> HashMap<String, String> {
    text.split(sep)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (k, v) = s.split_once('=').expect("key=value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn get<T: std::str::FromStr>(c: &HashMap<String, String>, key: &str, default: T) -> T
where
    T::Err: std::fmt::Debug,
{
    c.get(key).map_or(default, |v| v.parse().unwrap())
}

/// The optimizer `kind` of the problem's parameters, one group or the fixture's two.
fn optimizer(kind: &str, c: &HashMap<String, String>, groups: &str, p: &Problem) -> Result<Opt> {
    let groups: Option<Vec<ParamGroup>> = (!groups.is_empty()).then(|| {
        groups
            .split(';')
            .zip(&p.params)
            .map(|(g, param)| {
                let g = kv(g, ',');
                let mut group = ParamGroup::new(vec![param.clone()]);
                if let Some(lr) = g.get("lr") {
                    group = group.lr(lr.parse().unwrap());
                }
                if let Some(wd) = g.get("weight_decay") {
                    group = group.weight_decay(wd.parse().unwrap());
                }
                group
            })
            .collect()
    });
    let params = p.params.to_vec();
    macro_rules! build {
        ($ty:ident, $config:expr) => {
            build!($ty, $config, |o| o)
        };
        // `$flagged` switches the options that live on the optimizer, not in its config
        ($ty:ident, $config:expr, |$o:ident| $flagged:expr) => {{
            let config = $config;
            let $o = match groups {
                Some(g) => $ty::with_groups(g, config)?,
                None => $ty::new(params, config)?,
            };
            Ok(Opt::$ty($flagged))
        }};
    }
    match kind {
        "sgd" => {
            let d = SgdConfig::default();
            build!(
                Sgd,
                SgdConfig {
                    lr: get(c, "lr", d.lr),
                    momentum: get(c, "momentum", d.momentum),
                    dampening: get(c, "dampening", d.dampening),
                    weight_decay: get(c, "weight_decay", d.weight_decay),
                    nesterov: get(c, "nesterov", d.nesterov),
                },
                |o| o.maximize(get(c, "maximize", false))
            )
        }
        "adam" => {
            let d = AdamConfig::default();
            build!(
                Adam,
                AdamConfig {
                    lr: get(c, "lr", d.lr),
                    betas: (get(c, "beta1", d.betas.0), get(c, "beta2", d.betas.1)),
                    eps: get(c, "eps", d.eps),
                    weight_decay: get(c, "weight_decay", d.weight_decay),
                    amsgrad: get(c, "amsgrad", d.amsgrad),
                    maximize: get(c, "maximize", d.maximize),
                }
            )
        }
        "adamw" => {
            let d = AdamWConfig::default();
            build!(
                AdamW,
                AdamWConfig {
                    lr: get(c, "lr", d.lr),
                    betas: (get(c, "beta1", d.betas.0), get(c, "beta2", d.betas.1)),
                    eps: get(c, "eps", d.eps),
                    weight_decay: get(c, "weight_decay", d.weight_decay),
                },
                |o| o
                    .amsgrad(get(c, "amsgrad", false))?
                    .maximize(get(c, "maximize", false))
            )
        }
        "rmsprop" => {
            let d = RmsPropConfig::default();
            build!(
                RmsProp,
                RmsPropConfig {
                    lr: get(c, "lr", d.lr),
                    alpha: get(c, "alpha", d.alpha),
                    eps: get(c, "eps", d.eps),
                    weight_decay: get(c, "weight_decay", d.weight_decay),
                    momentum: get(c, "momentum", d.momentum),
                    centered: get(c, "centered", d.centered),
                    maximize: get(c, "maximize", d.maximize),
                }
            )
        }
        "adagrad" => {
            let d = AdagradConfig::default();
            build!(
                Adagrad,
                AdagradConfig {
                    lr: get(c, "lr", d.lr),
                    lr_decay: get(c, "lr_decay", d.lr_decay),
                    weight_decay: get(c, "weight_decay", d.weight_decay),
                    initial_accumulator_value: get(
                        c,
                        "initial_accumulator_value",
                        d.initial_accumulator_value
                    ),
                    eps: get(c, "eps", d.eps),
                    maximize: get(c, "maximize", d.maximize),
                }
            )
        }
        other => panic!("unknown optimizer {other}"),
    }
}

/// `got` within `tol` relative of PyTorch's `want`; below 0.1 in magnitude, within `tol * 0.1`
/// absolute (an element that crosses zero keeps the rounding of the larger values it passed
/// through, and PyTorch's vector kernels may fuse a multiply-add where Rust rounds twice).
#[track_caller]
fn close_rel(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(*g) - w).abs();
        assert!(
            err <= tol * w.abs().max(0.1),
            "{what}, element {i}: {g} vs PyTorch's {w} (relative error {})",
            err / w.abs()
        );
    }
}

// ---- optimizers against PyTorch ----------------------------------------------------------

#[test]
fn every_optimizer_matches_pytorch_after_eight_steps() {
    let mut seen = 0;
    for line in FIXTURE.lines().filter_map(|l| l.strip_prefix("opt|")) {
        let f: Vec<&str> = line.split('|').collect();
        let (label, kind, steps) = (f[0], f[1], f[2].parse::<usize>().unwrap());
        let p = Problem::new();
        let mut opt = optimizer(kind, &kv(f[3], ' '), f[4], &p).unwrap();
        for _ in 0..steps {
            opt.get().step_with(&p.grads()).unwrap();
        }
        close_rel(
            &vals(&p.params[0]),
            &floats(f[5]),
            1e-6,
            &format!("{label} p0"),
        );
        close_rel(
            &vals(&p.params[1]),
            &floats(f[6]),
            1e-6,
            &format!("{label} p1"),
        );
        seen += 1;
    }
    assert_eq!(seen, 20, "the fixture's optimizer cases");
}

#[test]
fn maximize_climbs_where_minimizing_descends() {
    // one step of plain SGD: p moves by +lr g when maximizing, -lr g otherwise
    for maximize in [false, true] {
        let p = Problem::new();
        let before = vals(&p.params[0]);
        let g = vals(p.grads()[0].as_ref().unwrap());
        let config = SgdConfig {
            lr: 0.5,
            ..SgdConfig::default()
        };
        let mut opt = Sgd::new(p.params.to_vec(), config)
            .unwrap()
            .maximize(maximize);
        assert_eq!(opt.is_maximizing(), maximize);
        opt.step_with(&p.grads()).unwrap();
        let sign = if maximize { 1.0 } else { -1.0 };
        let want: Vec<f32> = before
            .iter()
            .zip(&g)
            .map(|(b, g)| b + sign * 0.5 * g)
            .collect();
        assert_eq!(vals(&p.params[0]), want);
    }
}

// ---- schedules against PyTorch -------------------------------------------------------------

/// An SGD of the problem's two parameters in two groups with rates 0.1 and 0.02.
fn two_groups(p: &Problem) -> Sgd {
    let groups = vec![
        ParamGroup::new(vec![p.params[0].clone()]).lr(0.1),
        ParamGroup::new(vec![p.params[1].clone()]).lr(0.02),
    ];
    Sgd::with_groups(groups, SgdConfig::default()).unwrap()
}

fn lr_sequence(text: &str) -> Vec<Vec<f64>> {
    text.split(';')
        .map(|e| e.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

fn schedule(kind: &str, c: &HashMap<String, String>, opt: &mut Sgd) -> Box<dyn LrSchedule> {
    match kind {
        "step" => Box::new(
            StepLr::new(
                opt,
                StepLrConfig {
                    step_size: get(c, "step_size", 1),
                    gamma: get(c, "gamma", 0.1),
                },
            )
            .unwrap(),
        ),
        "linear" => Box::new(
            LinearLr::new(
                opt,
                LinearLrConfig {
                    start_factor: get(c, "start_factor", 1.0 / 3.0),
                    end_factor: get(c, "end_factor", 1.0),
                    total_iters: get(c, "total_iters", 5),
                },
            )
            .unwrap(),
        ),
        "warmup_cosine" => Box::new(
            WarmupCosineLr::new(
                opt,
                WarmupCosineLrConfig {
                    warmup_iters: get(c, "warmup_iters", 0),
                    warmup_start_factor: get(c, "warmup_start_factor", 1.0 / 3.0),
                    t_max: get(c, "t_max", 1),
                    eta_min: get(c, "eta_min", 0.0),
                },
            )
            .unwrap(),
        ),
        "one_cycle" => {
            let d = OneCycleLrConfig::default();
            let anneal = match c.get("anneal").map(String::as_str) {
                Some("linear") => Anneal::Linear,
                _ => Anneal::Cos,
            };
            Box::new(
                OneCycleLr::new(
                    opt,
                    OneCycleLrConfig {
                        max_lr: get(c, "max_lr", d.max_lr),
                        total_steps: get(c, "total_steps", d.total_steps),
                        pct_start: get(c, "pct_start", d.pct_start),
                        anneal,
                        div_factor: get(c, "div_factor", d.div_factor),
                        final_div_factor: get(c, "final_div_factor", d.final_div_factor),
                    },
                )
                .unwrap(),
            )
        }
        other => panic!("unknown schedule {other}"),
    }
}

#[test]
fn every_schedule_matches_pytorchs_last_lr_over_thirty_steps() {
    let mut seen = 0;
    for line in FIXTURE.lines().filter_map(|l| l.strip_prefix("sched|")) {
        let f: Vec<&str> = line.split('|').collect();
        let (label, kind) = (f[0], f[1]);
        let want = lr_sequence(f[3]);
        let p = Problem::new();
        let mut opt = two_groups(&p);
        let mut sched = schedule(kind, &kv(f[2], ' '), &mut opt);
        for (epoch, want) in want.iter().enumerate() {
            if epoch > 0 {
                opt.step_with(&p.grads()).unwrap();
                sched.step(&mut opt).unwrap();
            }
            assert_eq!(sched.epoch(), epoch as u64);
            assert_eq!(sched.last_lr(), opt.group_lrs(), "{label}: what it set");
            if kind == "one_cycle" && epoch == 30 {
                // the step after the cycle (total_steps = 30) keeps the final rate, where
                // PyTorch extrapolates the last phase (to a negative rate when linear)
                let end = lr_sequence(f[3])[29].clone();
                close_rel(
                    sched.last_lr(),
                    &end,
                    1e-6,
                    &format!("{label} epoch {epoch}"),
                );
                let err = sched.step(&mut opt).unwrap_err();
                assert_eq!(err.kind(), ErrorKind::Value, "{label}: a step past the end");
                assert_eq!(sched.epoch(), 30);
                assert_eq!(opt.group_lrs(), sched.last_lr());
                continue;
            }
            close_rel(
                sched.last_lr(),
                want,
                1e-6,
                &format!("{label} epoch {epoch}"),
            );
        }
        assert_eq!(want.len(), 31, "{label}: construction and thirty steps");
        seen += 1;
    }
    assert_eq!(seen, 7, "the fixture's schedule cases");
}

#[test]
fn reduce_on_plateau_matches_pytorch_on_scripted_metrics() {
    let mut seen = 0;
    for line in FIXTURE.lines().filter_map(|l| l.strip_prefix("plateau|")) {
        let f: Vec<&str> = line.split('|').collect();
        let (label, c) = (f[0], kv(f[1], ' '));
        let d = ReduceLrOnPlateauConfig::default();
        let config = ReduceLrOnPlateauConfig {
            mode: match c.get("mode").map(String::as_str) {
                Some("max") => PlateauMode::Max,
                _ => PlateauMode::Min,
            },
            factor: get(&c, "factor", d.factor),
            patience: get(&c, "patience", d.patience),
            threshold: get(&c, "threshold", d.threshold),
            cooldown: get(&c, "cooldown", d.cooldown),
            min_lr: get(&c, "min_lr", d.min_lr),
            eps: d.eps,
        };
        let p = Problem::new();
        let mut opt = two_groups(&p);
        let mut sched = ReduceLrOnPlateau::new(&opt, config).unwrap();
        let want = lr_sequence(f[3]);
        let metrics = floats(f[2]);
        assert_eq!(metrics.len(), want.len());
        let mut cuts = 0;
        for (epoch, (m, want)) in metrics.iter().zip(&want).enumerate() {
            let before = opt.group_lrs();
            sched.step(&mut opt, *m).unwrap();
            cuts += usize::from(opt.group_lrs() != before);
            assert_eq!(sched.last_lr(), opt.group_lrs());
            close_rel(
                sched.last_lr(),
                want,
                1e-6,
                &format!("{label} epoch {epoch}"),
            );
        }
        // the scripted metrics make the non-default cases cut, and the defaults not
        assert!(cuts > 0, "{label}: the script plateaus");
        seen += 1;
    }
    assert_eq!(seen, 3);
}

#[test]
fn schedules_drive_an_optimizer_without_groups_through_the_provided_methods() {
    /// A user optimizer that knows nothing of groups.
    struct Plain {
        params: Vec<Tensor>,
        lr: f32,
    }
    impl Optimizer for Plain {
        fn params(&self) -> &[Tensor] {
            &self.params
        }
        fn step_with(&mut self, _grads: &[Option<Tensor>]) -> Result<()> {
            Ok(())
        }
        fn lr(&self) -> f32 {
            self.lr
        }
        fn set_lr(&mut self, lr: f32) -> Result<()> {
            self.lr = lr;
            Ok(())
        }
    }
    let mut opt = Plain {
        params: Problem::new().params.to_vec(),
        lr: 0.4,
    };
    let mut sched = StepLr::new(
        &mut opt,
        StepLrConfig {
            step_size: 1,
            gamma: 0.5,
        },
    )
    .unwrap();
    sched.step(&mut opt).unwrap();
    assert_eq!(opt.lr, 0.2);
    assert_eq!(opt.group_lrs(), [0.2]);
    let err = opt.set_group_lrs(&[0.1, 0.2]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert_eq!(opt.lr, 0.2);
}

// ---- saving, loading, resuming -----------------------------------------------------------

/// `k` steps, a save, a fresh optimizer over parameters at the same values that loads the
/// file, `n - k` more steps: bit for bit the parameters of `n` steps in one run, for each
/// optimizer kind through its own save/load.
#[test]
fn new_optimizers_resume_from_their_state_files_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "adam",
            "lr=0.05 weight_decay=0.05 amsgrad=true maximize=true",
            "",
        ),
        (
            "adamw",
            "lr=0.05 weight_decay=0.1 amsgrad=true",
            "weight_decay=0.2;lr=0.02",
        ),
        (
            "rmsprop",
            "lr=0.01 alpha=0.9 weight_decay=0.05 momentum=0.8 centered=true",
            "",
        ),
        ("rmsprop", "lr=0.01", "lr=0.02;weight_decay=0.1"),
        (
            "adagrad",
            "lr=0.1 lr_decay=0.05 initial_accumulator_value=0.1",
            "lr=0.2;lr=0.05",
        ),
        (
            "sgd",
            "lr=0.05 momentum=0.9 maximize=true",
            "lr=0.01;weight_decay=0.3",
        ),
    ];
    let (n, k) = (7, 3);
    for (case, (kind, config, groups)) in cases.into_iter().enumerate() {
        let c = kv(config, ' ');
        let straight = Problem::new();
        let mut opt = optimizer(kind, &c, groups, &straight).unwrap();
        for _ in 0..n {
            opt.get().step_with(&straight.grads()).unwrap();
        }

        let first = Problem::new();
        let mut opt = optimizer(kind, &c, groups, &first).unwrap();
        for _ in 0..k {
            opt.get().step_with(&first.grads()).unwrap();
        }
        let path = dir.path().join(format!("{case}.safetensors"));
        opt.save(&first.names(), &path).unwrap();

        // a fresh optimizer with another config: the file's replaces it
        let second = Problem::new();
        for (q, p) in second.params.iter().zip(&first.params) {
            q.copy_from(p).unwrap();
        }
        let mut fresh = optimizer(kind, &HashMap::new(), groups, &second).unwrap();
        fresh.load(&second.names(), &path).unwrap();
        assert_eq!(
            fresh.get().group_lrs(),
            opt.get().group_lrs(),
            "{kind}: the groups' rates"
        );
        for _ in 0..n - k {
            fresh.get().step_with(&second.grads()).unwrap();
        }
        for (a, b) in second.params.iter().zip(&straight.params) {
            let (a, b) = (vals(a), vals(b));
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{kind} case {case}: resumed {a:?} vs straight {b:?}"
            );
        }
    }
}

/// Each optimizer kind of the tables, so that its own `save_state`/`load_state` are reachable.
enum Opt {
    Sgd(Sgd),
    Adam(Adam),
    AdamW(AdamW),
    RmsProp(RmsProp),
    Adagrad(Adagrad),
}

impl Opt {
    fn get(&mut self) -> &mut dyn Optimizer {
        match self {
            Opt::Sgd(o) => o,
            Opt::Adam(o) => o,
            Opt::AdamW(o) => o,
            Opt::RmsProp(o) => o,
            Opt::Adagrad(o) => o,
        }
    }

    fn save(&self, names: &[(String, Tensor)], path: &std::path::Path) -> Result<()> {
        match self {
            Opt::Sgd(o) => o.save_state(names, path),
            Opt::Adam(o) => o.save_state(names, path),
            Opt::AdamW(o) => o.save_state(names, path),
            Opt::RmsProp(o) => o.save_state(names, path),
            Opt::Adagrad(o) => o.save_state(names, path),
        }
    }

    fn load(&mut self, names: &[(String, Tensor)], path: &std::path::Path) -> Result<()> {
        match self {
            Opt::Sgd(o) => o.load_state(names, path),
            Opt::Adam(o) => o.load_state(names, path),
            Opt::AdamW(o) => o.load_state(names, path),
            Opt::RmsProp(o) => o.load_state(names, path),
            Opt::Adagrad(o) => o.load_state(names, path),
        }
    }
}

// ---- bad configs and steps -----------------------------------------------------------------

#[track_caller]
fn value_err<T>(r: Result<T>, what: &str) {
    match r {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Value, "{what}: {e}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

#[test]
fn bad_optimizer_configs_are_value_errors() {
    let p = Problem::new();
    let params = || p.params.to_vec();
    let adam = |c: AdamConfig| Adam::new(params(), c);
    value_err(
        adam(AdamConfig {
            lr: -1e-3,
            ..AdamConfig::default()
        }),
        "adam lr < 0",
    );
    value_err(
        adam(AdamConfig {
            betas: (1.0, 0.999),
            ..AdamConfig::default()
        }),
        "adam beta1 = 1",
    );
    value_err(
        adam(AdamConfig {
            betas: (0.9, -0.1),
            ..AdamConfig::default()
        }),
        "adam beta2 < 0",
    );
    value_err(
        adam(AdamConfig {
            eps: 0.0,
            ..AdamConfig::default()
        }),
        "adam eps = 0",
    );
    value_err(
        adam(AdamConfig {
            eps: -1e-8,
            ..AdamConfig::default()
        }),
        "adam eps < 0",
    );
    value_err(
        adam(AdamConfig {
            weight_decay: f32::NAN,
            ..AdamConfig::default()
        }),
        "adam wd NaN",
    );
    let adamw = |c: AdamWConfig| AdamW::new(params(), c);
    value_err(
        adamw(AdamWConfig {
            lr: -1.0,
            ..AdamWConfig::default()
        }),
        "adamw lr < 0",
    );
    value_err(
        adamw(AdamWConfig {
            betas: (0.9, 1.5),
            ..AdamWConfig::default()
        }),
        "adamw beta2",
    );
    let rms = |c: RmsPropConfig| RmsProp::new(params(), c);
    value_err(
        rms(RmsPropConfig {
            lr: -0.01,
            ..RmsPropConfig::default()
        }),
        "rmsprop lr < 0",
    );
    value_err(
        rms(RmsPropConfig {
            eps: 0.0,
            ..RmsPropConfig::default()
        }),
        "rmsprop eps = 0",
    );
    value_err(
        rms(RmsPropConfig {
            alpha: -0.5,
            ..RmsPropConfig::default()
        }),
        "rmsprop alpha",
    );
    value_err(
        rms(RmsPropConfig {
            momentum: -0.5,
            ..RmsPropConfig::default()
        }),
        "rmsprop mu",
    );
    let ada = |c: AdagradConfig| Adagrad::new(params(), c);
    value_err(
        ada(AdagradConfig {
            lr: -0.1,
            ..AdagradConfig::default()
        }),
        "adagrad lr < 0",
    );
    value_err(
        ada(AdagradConfig {
            eps: 0.0,
            ..AdagradConfig::default()
        }),
        "adagrad eps = 0",
    );
    value_err(
        ada(AdagradConfig {
            lr_decay: -1.0,
            ..AdagradConfig::default()
        }),
        "lr_decay",
    );
    value_err(
        ada(AdagradConfig {
            initial_accumulator_value: -1.0,
            ..AdagradConfig::default()
        }),
        "initial_accumulator_value",
    );
    value_err(
        Sgd::new(
            params(),
            SgdConfig {
                lr: -0.1,
                ..SgdConfig::default()
            },
        ),
        "sgd lr",
    );

    // groups: an empty group, a bad group option, a parameter in two groups
    let g = |k: usize| ParamGroup::new(vec![p.params[k].clone()]);
    let sgd = |groups| Sgd::with_groups(groups, SgdConfig::default());
    value_err(sgd(vec![]), "no groups");
    value_err(sgd(vec![g(0), ParamGroup::new(vec![])]), "an empty group");
    value_err(sgd(vec![g(0), g(1).lr(-0.5)]), "a group lr < 0");
    value_err(
        sgd(vec![g(0), g(1).weight_decay(f32::INFINITY)]),
        "a group wd",
    );
    value_err(sgd(vec![g(0), g(0)]), "a parameter in two groups");
}

#[test]
fn bad_schedule_configs_and_rates_are_value_errors_that_change_nothing() {
    let p = Problem::new();
    let mut opt = two_groups(&p);
    let before = opt.group_lrs();
    let one_cycle = |opt: &mut Sgd, c: OneCycleLrConfig| OneCycleLr::new(opt, c).map(|_| ());
    let d = OneCycleLrConfig::default();
    for (pct_start, what) in [
        (0.0, "pct_start 0"),
        (1.0, "pct_start 1"),
        (-0.2, "pct_start < 0"),
        (1.5, "pct_start > 1"),
    ] {
        value_err(
            one_cycle(&mut opt, OneCycleLrConfig { pct_start, ..d }),
            what,
        );
    }
    value_err(
        one_cycle(
            &mut opt,
            OneCycleLrConfig {
                total_steps: 0,
                ..d
            },
        ),
        "total_steps 0",
    );
    value_err(
        one_cycle(&mut opt, OneCycleLrConfig { max_lr: -1.0, ..d }),
        "max_lr < 0",
    );
    value_err(
        one_cycle(
            &mut opt,
            OneCycleLrConfig {
                div_factor: 0.0,
                ..d
            },
        ),
        "div_factor 0",
    );
    // pct_start * total_steps = 1: the rise would end at step 0 (PyTorch divides by zero)
    value_err(
        one_cycle(
            &mut opt,
            OneCycleLrConfig {
                total_steps: 4,
                pct_start: 0.25,
                ..d
            },
        ),
        "an empty rise",
    );
    value_err(
        StepLr::new(
            &mut opt,
            StepLrConfig {
                step_size: 0,
                gamma: 0.5,
            },
        ),
        "step_size 0",
    );
    value_err(
        StepLr::new(
            &mut opt,
            StepLrConfig {
                step_size: 2,
                gamma: -0.5,
            },
        ),
        "gamma < 0",
    );
    let lin = LinearLrConfig::default();
    value_err(
        LinearLr::new(
            &mut opt,
            LinearLrConfig {
                start_factor: 0.0,
                ..lin
            },
        ),
        "start 0",
    );
    value_err(
        LinearLr::new(
            &mut opt,
            LinearLrConfig {
                end_factor: 1.5,
                ..lin
            },
        ),
        "end > 1",
    );
    value_err(
        LinearLr::new(
            &mut opt,
            LinearLrConfig {
                total_iters: 0,
                ..lin
            },
        ),
        "iters 0",
    );
    let cos = WarmupCosineLrConfig {
        warmup_iters: 3,
        t_max: 10,
        ..WarmupCosineLrConfig::default()
    };
    value_err(
        WarmupCosineLr::new(&mut opt, WarmupCosineLrConfig { t_max: 0, ..cos }),
        "t_max 0",
    );
    value_err(
        WarmupCosineLr::new(
            &mut opt,
            WarmupCosineLrConfig {
                warmup_start_factor: 0.0,
                ..cos
            },
        ),
        "warm-up start 0",
    );
    value_err(
        WarmupCosineLr::new(
            &mut opt,
            WarmupCosineLrConfig {
                eta_min: -1.0,
                ..cos
            },
        ),
        "eta_min",
    );
    let plateau = ReduceLrOnPlateauConfig::default();
    for (factor, what) in [(1.0, "factor 1"), (-0.1, "factor < 0")] {
        value_err(
            ReduceLrOnPlateau::new(&opt, ReduceLrOnPlateauConfig { factor, ..plateau }),
            what,
        );
    }
    value_err(
        ReduceLrOnPlateau::new(
            &opt,
            ReduceLrOnPlateauConfig {
                threshold: -1.0,
                ..plateau
            },
        ),
        "threshold < 0",
    );
    assert_eq!(opt.group_lrs(), before, "a refused schedule sets no rate");

    // rates an optimizer refuses
    value_err(opt.set_group_lrs(&[0.1]), "one rate for two groups");
    value_err(opt.set_group_lrs(&[0.1, -0.1]), "a negative rate");
    value_err(opt.set_group_lrs(&[f32::NAN, 0.1]), "a NaN rate");
    assert_eq!(opt.group_lrs(), before, "a refused rate changes no group");

    // a cycle of 4 steps: epochs 0..=4, then the step past its end changes nothing
    let mut sched = OneCycleLr::new(
        &mut opt,
        OneCycleLrConfig {
            total_steps: 4,
            pct_start: 0.5,
            ..d
        },
    )
    .unwrap();
    for _ in 0..4 {
        sched.step(&mut opt).unwrap();
    }
    let (last, lrs) = (sched.last_lr().to_vec(), opt.group_lrs());
    value_err(sched.step(&mut opt), "a step past total_steps");
    assert_eq!(
        (sched.epoch(), sched.last_lr(), opt.group_lrs()),
        (4, &last[..], lrs)
    );

    // set_lr sets every group; a schedule then starts from those rates
    opt.set_lr(0.3).unwrap();
    assert_eq!(opt.group_lrs(), [0.3, 0.3]);
}

#[test]
fn a_state_file_of_another_kind_or_group_count_loads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adam.safetensors");
    let p = Problem::new();
    let mut adam = Adam::new(
        p.params.to_vec(),
        AdamConfig {
            amsgrad: true,
            ..AdamConfig::default()
        },
    )
    .unwrap();
    adam.step_with(&p.grads()).unwrap();
    adam.save_state(&p.names(), &path).unwrap();

    // an AdamW cannot read Adam's file
    let mut adamw = AdamW::new(p.params.to_vec(), AdamWConfig::default()).unwrap();
    value_err(
        adamw.load_state(&p.names(), &path),
        "Adam's file into AdamW",
    );
    assert_eq!(
        (adamw.steps(0), adamw.config()),
        (0, &AdamWConfig::default())
    );

    // two groups cannot read one group's state
    let groups = vec![
        ParamGroup::new(vec![p.params[0].clone()]),
        ParamGroup::new(vec![p.params[1].clone()]).lr(0.5),
    ];
    let mut two = Adam::with_groups(groups, AdamConfig::default()).unwrap();
    value_err(
        two.load_state(&p.names(), &path),
        "one group's file into two groups",
    );
    assert_eq!((two.steps(0), two.group_lrs()), (0, vec![1e-3, 0.5]));

    // an Adam without AMSGrad reads the file's config, AMSGrad included, and steps on
    let mut plain = Adam::new(p.params.to_vec(), AdamConfig::default()).unwrap();
    plain.load_state(&p.names(), &path).unwrap();
    assert_eq!((plain.steps(0), plain.config()), (1, adam.config()));
}

/// AdamW's and SGD's new switches live on the optimizer, so their configs keep their fields;
/// AMSGrad cannot be switched once moments exist.
#[test]
fn adamw_amsgrad_is_switched_before_the_first_step() {
    let p = Problem::new();
    let opt = AdamW::new(p.params.to_vec(), AdamWConfig::default()).unwrap();
    let mut opt = opt.amsgrad(true).unwrap().maximize(true);
    assert_eq!(opt.flags(), (true, true));
    opt.step_with(&p.grads()).unwrap();
    let before = vals(&p.params[0]);
    let err = opt.amsgrad(false).unwrap_err();
    assert_eq!(err.kind(), autograd_core::ErrorKind::Value);
    assert_eq!(vals(&p.params[0]), before);
}

/// Every optimizer of the crate steps each parameter apart (what `Ddp::backward_step` relies
/// on): a step of one parameter at a time, the others `None`, is bitwise one step of all, over
/// several steps, with groups of their own rate and weight decay, a parameter without a
/// gradient on one step, and the options that keep state (momentum, Nesterov, AMSGrad,
/// centered RMSprop, Adagrad's rate decay, `maximize`).
#[test]
fn a_step_a_parameter_at_a_time_is_one_step_of_all() {
    type Make = fn(Vec<ParamGroup>) -> Result<Box<dyn Optimizer>>;
    let makers: [(&str, Make); 5] = [
        ("Sgd", |g| {
            let config = SgdConfig {
                lr: 0.1,
                momentum: 0.9,
                nesterov: true,
                weight_decay: 0.01,
                ..SgdConfig::default()
            };
            Ok(Box::new(Sgd::with_groups(g, config)?.maximize(true)))
        }),
        ("Adam", |g| {
            let config = AdamConfig {
                lr: 0.01,
                amsgrad: true,
                weight_decay: 0.01,
                ..AdamConfig::default()
            };
            Ok(Box::new(Adam::with_groups(g, config)?))
        }),
        ("AdamW", |g| {
            let config = AdamWConfig {
                lr: 0.01,
                weight_decay: 0.1,
                ..AdamWConfig::default()
            };
            Ok(Box::new(AdamW::with_groups(g, config)?.amsgrad(true)?))
        }),
        ("RmsProp", |g| {
            let config = RmsPropConfig {
                lr: 0.01,
                momentum: 0.5,
                centered: true,
                ..RmsPropConfig::default()
            };
            Ok(Box::new(RmsProp::with_groups(g, config)?))
        }),
        ("Adagrad", |g| {
            let config = AdagradConfig {
                lr: 0.1,
                lr_decay: 0.01,
                ..AdagradConfig::default()
            };
            Ok(Box::new(Adagrad::with_groups(g, config)?))
        }),
    ];
    let dims: [&[usize]; 3] = [&[2, 3], &[4], &[3]];
    // tensor i of `dims`, element k being f(i, k)
    let filled = |i: usize, f: &dyn Fn(usize, usize) -> f32| {
        let n: usize = dims[i].iter().product();
        t(&(0..n).map(|k| f(i, k)).collect::<Vec<_>>(), dims[i])
    };
    let params = || -> Vec<Tensor> {
        (0..dims.len())
            .map(|i| filled(i, &|i, k| (k as f32 - 1.5) * 0.3 + i as f32))
            .collect()
    };
    let groups = |ps: &[Tensor]| {
        vec![
            ParamGroup::new(ps[..2].to_vec()).lr(0.05),
            ParamGroup::new(ps[2..].to_vec()).weight_decay(0.2),
        ]
    };
    for (name, make) in makers {
        let (whole, apart) = (params(), params());
        let mut at_once = make(groups(&whole)).unwrap();
        let mut one_by_one = make(groups(&apart)).unwrap();
        assert!(one_by_one.steps_each_parameter_apart(), "{name}");
        for step in 0..4 {
            let grads: Vec<Option<Tensor>> = (0..dims.len())
                .map(|i| {
                    // the second parameter has no gradient on the third step
                    (i != 1 || step != 2).then(|| {
                        filled(i, &|i, k| {
                            ((k * 7 + i * 3 + step * 5) % 11) as f32 * 0.1 - 0.45
                        })
                    })
                })
                .collect();
            at_once.step_with(&grads).unwrap();
            for i in 0..grads.len() {
                let mut one = vec![None; grads.len()];
                one[i] = grads[i].clone();
                one_by_one.step_with(&one).unwrap();
            }
        }
        for (i, (w, a)) in whole.iter().zip(&apart).enumerate() {
            let (w, a) = (vals(w), vals(a));
            assert!(
                w.iter().zip(&a).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{name}: parameter {i} stepped apart is {a:?}, at once {w:?}"
            );
            assert_ne!(w, vals(&params()[i]), "{name}: parameter {i} did not move");
        }
    }
}
