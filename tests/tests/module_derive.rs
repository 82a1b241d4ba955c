//! `#[derive(Module)]` on nested models: PyTorch's dotted names in declaration order (`Vec`s
//! and arrays numbered, an absent `Option` skipped, `rename` and `skip` obeyed), parameter and
//! buffer counts, `train`/`eval` reaching every `Dropout`, parameters as handles to the
//! model's own storage, generic modules, and a property test over random module trees.

use std::marker::PhantomData;

use autograd_core::{no_grad, shape, DType, Rng, Tensor};
use autograd_ops::{Dropout, Embedding, LayerNorm, Linear, Module, Role};
use proptest::prelude::*;

const D: usize = 8;
const VOCAB: usize = 16;

#[derive(Module)]
struct Attention {
    qkv: Linear,
    proj: Linear,
    drop: Dropout,
}

#[derive(Module)]
struct Block {
    ln1: LayerNorm,
    attn: Attention,
    ln2: LayerNorm,
    mlp: [Linear; 2],
    drop: Dropout,
}

/// Saved beside the parameters but not trained, as running statistics are.
#[derive(Module)]
struct Stats {
    mean: Tensor,
    var: Tensor,
}

struct Config {
    context: usize,
}

#[derive(Module)]
struct Transformer {
    embed: Embedding,
    blocks: Vec<Block>,
    #[module(buffer)]
    causal_mask: Tensor,
    #[module(buffer)]
    stats: Stats,
    head: Option<Linear>,
    adapter: Option<Linear>,
    #[module(skip)]
    config: Config,
    #[module(rename = "ln_f")]
    final_norm: LayerNorm,
    #[module(training)]
    training: bool,
}

fn linear(i: usize, o: usize, rng: &mut Rng) -> Linear {
    Linear::new(i, o, true, rng).unwrap()
}

fn block(rng: &mut Rng) -> Block {
    Block {
        ln1: LayerNorm::new(&[D], 1e-5).unwrap(),
        attn: Attention {
            qkv: linear(D, 3 * D, rng),
            proj: linear(D, D, rng),
            drop: Dropout::new(0.1).unwrap(),
        },
        ln2: LayerNorm::new(&[D], 1e-5).unwrap(),
        mlp: [linear(D, 4 * D, rng), linear(4 * D, D, rng)],
        drop: Dropout::new(0.1).unwrap(),
    }
}

fn transformer(blocks: usize) -> Transformer {
    let mut rng = Rng::new(7);
    let context = 4;
    Transformer {
        embed: Embedding::new(VOCAB, D, &mut rng).unwrap(),
        blocks: (0..blocks).map(|_| block(&mut rng)).collect(),
        causal_mask: Tensor::ones(shape![context, context], &DType::Float32).unwrap(),
        stats: Stats {
            mean: Tensor::zeros(shape![D], &DType::Float32).unwrap(),
            var: Tensor::ones(shape![D], &DType::Float32).unwrap(),
        },
        head: Some(linear(D, VOCAB, &mut rng)),
        adapter: None,
        config: Config { context },
        final_norm: LayerNorm::new(&[D], 1e-5).unwrap(),
        training: true,
    }
}

/// The names `print([n for n, _ in model.named_parameters()])` gives for the same model in
/// PyTorch (blocks an `nn.ModuleList`, `mlp` an `nn.Sequential`).
fn pytorch_names(blocks: usize) -> Vec<String> {
    let mut names = vec!["embed.weight".to_string()];
    for b in 0..blocks {
        for part in [
            "ln1.weight",
            "ln1.bias",
            "attn.qkv.weight",
            "attn.qkv.bias",
            "attn.proj.weight",
            "attn.proj.bias",
            "ln2.weight",
            "ln2.bias",
            "mlp.0.weight",
            "mlp.0.bias",
            "mlp.1.weight",
            "mlp.1.bias",
        ] {
            names.push(format!("blocks.{b}.{part}"));
        }
    }
    names.extend(["head.weight", "head.bias", "ln_f.weight", "ln_f.bias"].map(String::from));
    names
}

fn names(named: &[(String, Tensor)]) -> Vec<String> {
    named.iter().map(|(n, _)| n.clone()).collect()
}

#[test]
fn names_are_pytorchs_in_declaration_order() {
    let model = transformer(2);
    assert_eq!(names(&model.named_parameters()), pytorch_names(2));
    assert_eq!(
        names(&model.named_buffers()),
        ["causal_mask", "stats.mean", "stats.var"]
    );
    // every tensor of the state dict once, buffers where their fields stand
    let all: Vec<(String, Role)> = model
        .named_tensors()
        .into_iter()
        .map(|(n, _, r)| (n, r))
        .collect();
    assert_eq!(all.len(), pytorch_names(2).len() + 3);
    assert_eq!(all[0], ("embed.weight".to_string(), Role::Parameter));
    let mask = all.iter().position(|(n, _)| n == "causal_mask").unwrap();
    assert_eq!(all[mask - 1].0, "blocks.1.mlp.1.bias");
    assert_eq!(all[mask + 3].0, "head.weight");
    assert_eq!(model.config.context, 4);
}

#[test]
fn counts_add_up() {
    let model = transformer(2);
    let linear = |i: usize, o: usize| i * o + o;
    let per_block =
        2 * D + linear(D, 3 * D) + linear(D, D) + 2 * D + linear(D, 4 * D) + linear(4 * D, D);
    let total = VOCAB * D + 2 * per_block + linear(D, VOCAB) + 2 * D;
    assert_eq!(model.num_parameters(), total);
    assert_eq!(model.parameters().len(), 1 + 2 * 12 + 4);
    let sizes: usize = model.parameters().iter().map(Tensor::size).sum();
    assert_eq!(sizes, total);
    // buffers are not parameters
    let buffers: usize = model.named_buffers().iter().map(|(_, t)| t.size()).sum();
    assert_eq!(buffers, 4 * 4 + 2 * D);
}

#[test]
fn an_option_present_and_absent() {
    let mut model = transformer(1);
    let with_head = model.named_parameters().len();
    model.head = None;
    assert_eq!(model.named_parameters().len(), with_head - 2);
    model.adapter = Some(linear(D, D, &mut Rng::new(1)));
    let names = names(&model.named_parameters());
    assert!(names.iter().all(|n| !n.starts_with("head.")));
    assert_eq!(
        names[names.len() - 4..],
        ["adapter.weight", "adapter.bias", "ln_f.weight", "ln_f.bias"]
    );
}

fn dropout_modes(model: &Transformer) -> Vec<bool> {
    model
        .blocks
        .iter()
        .flat_map(|b| [b.attn.drop.is_training(), b.drop.is_training()])
        .collect()
}

#[test]
fn train_and_eval_reach_every_dropout() {
    let mut model = transformer(3);
    assert!(dropout_modes(&model).iter().all(|&t| t));
    model.eval();
    assert!(!model.training);
    assert_eq!(dropout_modes(&model), [false; 6]);
    // evaluation dropout is the identity: the input itself, no rng drawn
    let x = Tensor::randn(shape![2, D], &mut Rng::new(3)).unwrap();
    let mut rng = Rng::new(9);
    for b in &model.blocks {
        assert!(b.drop.forward(&x, &mut rng).unwrap().same_tensor(&x));
        assert!(b.attn.drop.forward(&x, &mut rng).unwrap().same_tensor(&x));
    }
    model.train();
    assert!(model.training);
    assert_eq!(dropout_modes(&model), [true; 6]);
    let dropped = model.blocks[0].drop.forward(&x, &mut rng).unwrap();
    assert!(!dropped.same_tensor(&x));
}

#[test]
fn parameters_are_handles_to_the_models_tensors() {
    let model = transformer(1);
    let params = model.parameters();
    {
        let _guard = no_grad();
        params[0].fill(3.0f32).unwrap();
        model.blocks[0]
            .attn
            .qkv
            .bias()
            .unwrap()
            .fill(-1.0f32)
            .unwrap();
    }
    assert!(model
        .embed
        .weight()
        .values::<f32>()
        .unwrap()
        .iter()
        .all(|&v| v == 3.0));
    let named = model.named_parameters();
    let (name, qkv_bias) = &named[4];
    assert_eq!(name, "blocks.0.attn.qkv.bias");
    assert!(qkv_bias.values::<f32>().unwrap().iter().all(|&v| v == -1.0));
    assert!(qkv_bias.same_tensor(model.blocks[0].attn.qkv.bias().unwrap()));
}

#[test]
fn built_in_layers_name_their_tensors_as_pytorch() {
    let mut rng = Rng::new(0);
    assert_eq!(
        names(&linear(3, 2, &mut rng).named_parameters()),
        ["weight", "bias"]
    );
    let no_bias = Linear::new(3, 2, false, &mut rng).unwrap();
    assert_eq!(names(&no_bias.named_parameters()), ["weight"]);
    let table = Embedding::new(5, 2, &mut rng).unwrap();
    assert_eq!(names(&table.named_parameters()), ["weight"]);
    let norm = LayerNorm::new(&[4], 1e-5).unwrap();
    assert_eq!(names(&norm.named_parameters()), ["weight", "bias"]);
    assert_eq!(Dropout::new(0.5).unwrap().num_parameters(), 0);
    // the inherent `parameters()` still answers, in the same order
    let l = linear(3, 2, &mut rng);
    let inherent = l.parameters();
    let derived = Module::parameters(&l);
    assert!(inherent.iter().zip(&derived).all(|(a, b)| a.same_tensor(b)));
}

/// A stack of any module, and a tag of a type that is not a module field at all: only the
/// walked field's parameter gets a `Field` bound.
#[derive(Module)]
struct Stack<M, T> {
    layers: Vec<M>,
    #[module(skip)]
    tag: T,
    #[module(skip)]
    _marker: PhantomData<fn() -> T>,
}

#[test]
fn generic_modules() {
    let mut rng = Rng::new(2);
    let mut stack = Stack {
        layers: vec![linear(2, 2, &mut rng), linear(2, 1, &mut rng)],
        tag: "not a tensor".to_string(),
        _marker: PhantomData,
    };
    assert_eq!(
        names(&stack.named_parameters()),
        [
            "layers.0.weight",
            "layers.0.bias",
            "layers.1.weight",
            "layers.1.bias"
        ]
    );
    let mut drops = Stack {
        layers: vec![Dropout::new(0.5).unwrap(); 3],
        tag: 0u8,
        _marker: PhantomData,
    };
    drops.eval();
    assert!(drops.layers.iter().all(|d| !d.is_training()));
    stack.eval();
    assert_eq!(stack.tag, "not a tensor");
}

// ---- random module trees -------------------------------------------------------------

/// A random module: parameters and buffers of given sizes, a dropout, children in a `Vec`
/// and one optional boxed child.
#[derive(Module)]
struct Node {
    params: Vec<Tensor>,
    #[module(buffer)]
    buffers: Vec<Tensor>,
    drop: Dropout,
    children: Vec<Node>,
    only: Option<Box<Node>>,
    #[module(skip)]
    depth: usize,
}

#[derive(Debug, Clone)]
struct Spec {
    params: Vec<usize>,
    buffers: Vec<usize>,
    children: Vec<Spec>,
    only: Option<Box<Spec>>,
}

fn spec() -> impl Strategy<Value = Spec> {
    let sizes = || prop::collection::vec(1usize..5, 0..3);
    let leaf = (sizes(), sizes()).prop_map(|(params, buffers)| Spec {
        params,
        buffers,
        children: Vec::new(),
        only: None,
    });
    leaf.prop_recursive(4, 40, 3, move |inner| {
        (
            sizes(),
            sizes(),
            prop::collection::vec(inner.clone(), 0..3),
            prop::option::of(inner),
        )
            .prop_map(|(params, buffers, children, only)| Spec {
                params,
                buffers,
                children,
                only: only.map(Box::new),
            })
    })
}

fn build(spec: &Spec, depth: usize) -> Node {
    let tensor = |n: usize| Tensor::zeros(shape![n], &DType::Float32).unwrap();
    Node {
        params: spec.params.iter().map(|&n| tensor(n)).collect(),
        buffers: spec.buffers.iter().map(|&n| tensor(n)).collect(),
        drop: Dropout::new(0.5).unwrap(),
        children: spec.children.iter().map(|c| build(c, depth + 1)).collect(),
        only: spec.only.as_ref().map(|c| Box::new(build(c, depth + 1))),
        depth,
    }
}

/// The names the spec's parameters (or buffers) get, computed without the derive.
fn expected(spec: &Spec, prefix: &str, buffers: bool, out: &mut Vec<(String, usize)>) {
    let join = |name: &str| {
        if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        }
    };
    let (field, sizes) = if buffers {
        ("buffers", &spec.buffers)
    } else {
        ("params", &spec.params)
    };
    for (i, &n) in sizes.iter().enumerate() {
        out.push((format!("{}.{i}", join(field)), n));
    }
    for (i, child) in spec.children.iter().enumerate() {
        expected(child, &format!("{}.{i}", join("children")), buffers, out);
    }
    if let Some(only) = &spec.only {
        expected(only, &join("only"), buffers, out);
    }
}

fn modes(node: &Node, out: &mut Vec<bool>) {
    out.push(node.drop.is_training());
    node.children.iter().for_each(|c| modes(c, out));
    if let Some(only) = &node.only {
        modes(only, out);
    }
}

proptest! {
    #[test]
    fn random_trees_have_unique_names_and_counts_that_add_up(spec in spec()) {
        let mut model = build(&spec, 0);
        prop_assert_eq!(model.depth, 0);
        let mut params = Vec::new();
        expected(&spec, "", false, &mut params);
        let mut buffers = Vec::new();
        expected(&spec, "", true, &mut buffers);

        let named: Vec<(String, usize)> =
            model.named_parameters().iter().map(|(n, t)| (n.clone(), t.size())).collect();
        prop_assert_eq!(&named, &params);
        let named_buffers: Vec<(String, usize)> =
            model.named_buffers().iter().map(|(n, t)| (n.clone(), t.size())).collect();
        prop_assert_eq!(&named_buffers, &buffers);

        let all = model.named_tensors();
        let unique: std::collections::HashSet<&str> = all.iter().map(|(n, _, _)| n.as_str()).collect();
        prop_assert_eq!(unique.len(), all.len());
        prop_assert_eq!(all.len(), params.len() + buffers.len());
        prop_assert_eq!(model.num_parameters(), params.iter().map(|p| p.1).sum::<usize>());
        prop_assert_eq!(model.parameters().len(), params.len());

        let mut seen = Vec::new();
        model.eval();
        modes(&model, &mut seen);
        prop_assert!(seen.iter().all(|&t| !t));
        seen.clear();
        model.train();
        modes(&model, &mut seen);
        prop_assert!(seen.iter().all(|&t| t));
    }
}

/// The crate path spelled out (as a string, serde's way), and a raw identifier's name
/// without its `r#`.
#[derive(Module)]
#[module(crate = "::autograd_ops")]
struct Keywords {
    r#type: Tensor,
    #[module(rename = "scale")]
    gain: Tensor,
}

#[test]
fn crate_path_rename_and_raw_identifiers() {
    let t = || Tensor::zeros(shape![2], &DType::Float32).unwrap();
    let k = Keywords {
        r#type: t(),
        gain: t(),
    };
    assert_eq!(names(&k.named_parameters()), ["type", "scale"]);
}
