//! Resuming training from files (issue 37 item 2): N steps equal k steps, a save of the model,
//! the optimizer and the generator, a load into fresh objects, and N − k steps, bit for bit —
//! dropout masks included. Optimizer state is matched by parameter name, so the fresh
//! optimizer may list its parameters in another order.

use std::path::Path;

use autograd_core::{shape, ErrorKind, Rng, Tensor};
use autograd_ops::module::join;
use autograd_ops::persist::{load_rng, save_rng};
use autograd_ops::{
    cross_entropy, dropout, relu, AdamW, AdamWConfig, CrossEntropyOptions, Linear, Module,
    Optimizer, Role, Sgd, SgdConfig,
};

struct Mlp {
    l1: Linear,
    l2: Linear,
    training: bool,
}

impl Mlp {
    fn new(seed: u64) -> Mlp {
        let mut rng = Rng::new(seed);
        Mlp {
            l1: Linear::new(5, 16, true, &mut rng).unwrap(),
            l2: Linear::new(16, 3, true, &mut rng).unwrap(),
            training: true,
        }
    }

    fn forward(&self, x: &Tensor, rng: &mut Rng) -> Tensor {
        let h = relu(&self.l1.forward(x).unwrap()).unwrap();
        let h = dropout(&h, 0.3, self.training, rng).unwrap();
        self.l2.forward(&h).unwrap()
    }
}

impl Module for Mlp {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        for (name, l) in [("l1", &self.l1), ("l2", &self.l2)] {
            let p = join(prefix, name);
            f(&join(&p, "weight"), l.weight(), Role::Parameter);
            if let Some(b) = l.bias() {
                f(&join(&p, "bias"), b, Role::Parameter);
            }
        }
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

/// A fixed batch.
fn data() -> (Tensor, Tensor) {
    let mut rng = Rng::new(42);
    let x = Tensor::randn(shape![12, 5], &mut rng).unwrap();
    let y = Tensor::from_vec((0..12).map(|i| i % 3).collect::<Vec<i32>>(), shape![12]).unwrap();
    (x, y)
}

/// One training step; the loss's bits.
fn step(m: &Mlp, opt: &mut dyn Optimizer, rng: &mut Rng, x: &Tensor, y: &Tensor) -> u32 {
    let logits = m.forward(x, rng);
    let loss = cross_entropy(&logits, y, CrossEntropyOptions::default()).unwrap();
    opt.zero_grad().unwrap();
    loss.backward().unwrap();
    opt.step().unwrap();
    loss.values::<f32>().unwrap()[0].to_bits()
}

fn bits(m: &Mlp) -> Vec<(String, Vec<u32>)> {
    m.named_parameters()
        .into_iter()
        .map(|(n, t)| {
            let v = t.values::<f32>().unwrap();
            (n, v.iter().map(|x| x.to_bits()).collect())
        })
        .collect()
}

/// Which optimizer a run uses.
#[derive(Clone, Copy)]
enum Kind {
    Sgd,
    AdamW,
}

/// A typed optimizer, so that its state can be saved and loaded (the trait does not do it).
struct Opt {
    kind: Kind,
    sgd: Option<Sgd>,
    adamw: Option<AdamW>,
}

impl Opt {
    fn new(kind: Kind, params: Vec<Tensor>, config_lr: Option<f32>) -> Opt {
        let lr = config_lr.unwrap_or(match kind {
            Kind::Sgd => 0.05,
            Kind::AdamW => 1e-2,
        });
        match kind {
            Kind::Sgd => Opt {
                kind,
                sgd: Some(
                    Sgd::new(
                        params,
                        SgdConfig {
                            lr,
                            momentum: 0.9,
                            weight_decay: 1e-3,
                            nesterov: true,
                            ..SgdConfig::default()
                        },
                    )
                    .unwrap(),
                ),
                adamw: None,
            },
            Kind::AdamW => Opt {
                kind,
                sgd: None,
                adamw: Some(
                    AdamW::new(
                        params,
                        AdamWConfig {
                            lr,
                            ..AdamWConfig::default()
                        },
                    )
                    .unwrap(),
                ),
            },
        }
    }

    fn get(&mut self) -> &mut dyn Optimizer {
        match self.kind {
            Kind::Sgd => self.sgd.as_mut().unwrap(),
            Kind::AdamW => self.adamw.as_mut().unwrap(),
        }
    }

    fn save(&self, names: &[(String, Tensor)], path: &Path) {
        match self.kind {
            Kind::Sgd => self.sgd.as_ref().unwrap().save_state(names, path).unwrap(),
            Kind::AdamW => self
                .adamw
                .as_ref()
                .unwrap()
                .save_state(names, path)
                .unwrap(),
        }
    }

    fn load(&mut self, names: &[(String, Tensor)], path: &Path) -> autograd_core::Result<()> {
        match self.kind {
            Kind::Sgd => self.sgd.as_mut().unwrap().load_state(names, path),
            Kind::AdamW => self.adamw.as_mut().unwrap().load_state(names, path),
        }
    }
}

const N: usize = 8;
const K: usize = 3;

fn resume_equals_uninterrupted(kind: Kind) {
    let (x, y) = data();
    // uninterrupted
    let a = Mlp::new(1);
    let mut opt_a = Opt::new(kind, a.parameters(), None);
    let mut rng_a = Rng::new(7);
    let losses_a: Vec<u32> = (0..N)
        .map(|_| step(&a, opt_a.get(), &mut rng_a, &x, &y))
        .collect();

    // k steps, save everything
    let dir = tempfile::tempdir().unwrap();
    let (model_path, opt_path, rng_path) = (
        dir.path().join("model.safetensors"),
        dir.path().join("optim.safetensors"),
        dir.path().join("rng.safetensors"),
    );
    let mut losses_b = Vec::new();
    {
        let b = Mlp::new(1);
        let mut opt_b = Opt::new(kind, b.parameters(), None);
        let mut rng_b = Rng::new(7);
        for _ in 0..K {
            losses_b.push(step(&b, opt_b.get(), &mut rng_b, &x, &y));
        }
        b.save(&model_path).unwrap();
        opt_b.save(&b.named_parameters(), &opt_path);
        save_rng(&rng_b, &rng_path).unwrap();
    }

    // fresh objects: other initial weights, another learning rate, parameters reversed
    let mut c = Mlp::new(99);
    c.load(&model_path).unwrap();
    let mut reversed = c.parameters();
    reversed.reverse();
    let mut opt_c = Opt::new(kind, reversed, Some(0.5));
    opt_c.load(&c.named_parameters(), &opt_path).unwrap();
    let mut rng_c = load_rng(&rng_path).unwrap();
    for _ in K..N {
        losses_b.push(step(&c, opt_c.get(), &mut rng_c, &x, &y));
    }

    assert_eq!(losses_a, losses_b, "loss sequences differ");
    assert_eq!(bits(&a), bits(&c), "parameters differ");
    assert_eq!(rng_a.next_u64(), rng_c.next_u64());
}

#[test]
fn sgd_resume_equals_the_uninterrupted_run_bit_for_bit() {
    resume_equals_uninterrupted(Kind::Sgd);
}

#[test]
fn adamw_resume_equals_the_uninterrupted_run_bit_for_bit() {
    resume_equals_uninterrupted(Kind::AdamW);
}

#[test]
fn optimizer_state_round_trips_steps_moments_and_hyperparameters() {
    let (x, y) = data();
    let m = Mlp::new(3);
    let mut opt = AdamW::new(
        m.parameters(),
        AdamWConfig {
            lr: 0.003,
            betas: (0.8, 0.95),
            eps: 1e-7,
            weight_decay: 0.1,
        },
    )
    .unwrap();
    let mut rng = Rng::new(0);
    for _ in 0..2 {
        step(&m, &mut opt, &mut rng, &x, &y);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adamw.safetensors");
    opt.save_state(&m.named_parameters(), &path).unwrap();
    let mut fresh = AdamW::new(m.parameters(), AdamWConfig::default()).unwrap();
    fresh.load_state(&m.named_parameters(), &path).unwrap();
    assert_eq!(fresh.config(), opt.config());
    for i in 0..4 {
        assert_eq!(fresh.steps(i), 2);
    }
}

#[test]
fn optimizer_state_of_another_model_or_kind_is_refused_and_changes_nothing() {
    let (x, y) = data();
    let m = Mlp::new(3);
    let mut sgd = Opt::new(Kind::Sgd, m.parameters(), None);
    let mut rng = Rng::new(0);
    step(&m, sgd.get(), &mut rng, &x, &y);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sgd.safetensors");
    sgd.save(&m.named_parameters(), &path);

    // an AdamW cannot take SGD state
    let mut adamw = AdamW::new(m.parameters(), AdamWConfig::default()).unwrap();
    let e = adamw.load_state(&m.named_parameters(), &path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("Sgd optimizer, not of AdamW"), "{e}");
    assert_eq!(adamw.config(), &AdamWConfig::default());

    // names that do not match: the state is of parameters this optimizer lacks
    let renamed: Vec<(String, Tensor)> = m
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (format!("other.{n}"), t))
        .collect();
    let mut fresh = Sgd::new(m.parameters(), SgdConfig::default()).unwrap();
    let e = fresh.load_state(&renamed, &path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("belongs to no parameter"), "{e}");
    assert_eq!(fresh.config(), &SgdConfig::default());
    assert!(fresh.momentum_buffer(0).is_none());

    // a parameter without a name
    let partial = m.named_parameters()[1..].to_vec();
    let e = fresh.load_state(&partial, &path).unwrap_err();
    assert!(
        e.to_string().contains("not among the named parameters"),
        "{e}"
    );

    // a model file is not an optimizer file
    let model_path = dir.path().join("model.safetensors");
    m.save(&model_path).unwrap();
    let e = fresh
        .load_state(&m.named_parameters(), &model_path)
        .unwrap_err();
    assert!(e.to_string().contains("not an optimizer state file"), "{e}");
}

#[test]
fn the_generator_state_keeps_its_cached_normal() {
    let mut rng = Rng::new(11);
    rng.normal(); // leaves the pair's second value cached
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rng.safetensors");
    save_rng(&rng, &path).unwrap();
    let mut back = load_rng(&path).unwrap();
    for _ in 0..5 {
        assert_eq!(rng.normal().to_bits(), back.normal().to_bits());
    }
    assert_eq!(rng.next_u64(), back.next_u64());
    assert_eq!(
        Rng::from_state([0, 0, 0, 0, 0, 0]).unwrap_err().kind(),
        ErrorKind::Value
    );
}
