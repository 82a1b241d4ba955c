//! Seeing the graph: `to_dot` parsed back, node `Display`, and the opt-in backward profile.

use autograd_core::ops::{add, matmul, mul, sum, tanh};
use autograd_core::{
    checkpoint, custom_gradient, no_grad, to_dot, to_dot_with_profile, Result, Tensor,
};
use autograd_tests::{grad_vals, t};

/// The DOT statements of `dot`: `(node ids, edges as (from, to))`.
fn parse(dot: &str) -> (Vec<String>, Vec<(String, String)>) {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for line in dot.lines().map(str::trim) {
        if let Some((from, rest)) = line.split_once(" -> ") {
            let to = rest.split([' ', ';']).next().unwrap_or_default();
            edges.push((from.to_owned(), to.to_owned()));
        } else if let Some((id, _)) = line.split_once(" [label=") {
            nodes.push(id.to_owned());
        }
    }
    (nodes, edges)
}

/// The statement that declares DOT node `id`.
fn statement<'a>(dot: &'a str, id: &str) -> &'a str {
    dot.lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("{id} [label=")))
        .unwrap_or_else(|| panic!("no node {id} in\n{dot}"))
}

/// The tensor `loss`'s node consumed (its first saved input).
fn mul_of(loss: &Tensor) -> Tensor {
    loss.autograd_ctx().unwrap().inputs()[0].clone()
}

fn node_id(t: &Tensor) -> String {
    format!("n{}", t.autograd_ctx().unwrap().id().get())
}

#[test]
fn a_small_graph_has_one_statement_per_node_and_leaf_and_one_edge_per_input() {
    // loss = sum(tanh(x @ w) * x2): nodes sum, mul, tanh, matmul; leaves x, w, x2.
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let w = t(&[0.5, -0.5, 0.25, 1.0], &[2, 2]);
    let x2 = t(&[1.0, 1.0, 2.0, 2.0], &[2, 2]);
    let h = tanh(&matmul(&x, &w).unwrap()).unwrap();
    let loss = sum(&mul(&h, &x2).unwrap()).unwrap();
    let dot = to_dot(&loss).unwrap();
    assert!(dot.starts_with("digraph autograd {"), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
    let (nodes, edges) = parse(&dot);
    assert_eq!(nodes.len(), 7, "{dot}");
    // sum->mul, mul->tanh, mul->x2, tanh->matmul, matmul->x, matmul->w
    assert_eq!(edges.len(), 6, "{dot}");
    // every edge joins declared nodes, from a node to its input's producer or leaf
    for (from, to) in &edges {
        assert!(nodes.contains(from) && nodes.contains(to), "{from} -> {to}");
        assert!(from.starts_with('n'));
    }
    assert!(edges.contains(&(node_id(&loss), node_id(&mul_of(&loss)))));
    assert!(edges.iter().any(|(_, to)| to == &format!("t{}", x2.id())));
    let root = statement(&dot, &node_id(&loss));
    assert!(root.contains("sum") && root.contains("[root]"), "{root}");
    let tanh_line = statement(&dot, &node_id(&h));
    assert!(
        tanh_line.contains("tanh") && tanh_line.contains("out (2,2) Float32"),
        "{tanh_line}"
    );
    let leaf = statement(&dot, &format!("t{}", x.id()));
    assert!(
        leaf.contains("leaf") && leaf.contains("shape=box"),
        "{leaf}"
    );
}

#[test]
fn a_tensor_used_twice_gives_two_edges_but_one_leaf() {
    let x = t(&[1.0, 2.0], &[2]);
    let loss = sum(&mul(&x, &x).unwrap()).unwrap();
    let (nodes, edges) = parse(&to_dot(&loss).unwrap());
    assert_eq!(nodes.len(), 3);
    assert_eq!(edges.len(), 3);
}

#[test]
fn a_shared_intermediate_is_drawn_once() {
    let x = t(&[1.0, 2.0], &[2]);
    let h = tanh(&x).unwrap();
    let loss = sum(&add(&h, &mul(&h, &h).unwrap()).unwrap()).unwrap();
    let (nodes, edges) = parse(&to_dot(&loss).unwrap());
    // sum, add, mul, tanh, x
    assert_eq!(nodes.len(), 5);
    // sum->add, add->tanh, add->mul, mul->tanh twice, tanh->x
    assert_eq!(edges.len(), 6);
}

#[test]
fn leaves_grads_custom_checkpoint_released_and_retained_are_marked() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = t(&[3.0, 4.0], &[2]);
    let value = {
        let _g = no_grad();
        mul(&x, &y).unwrap()
    };
    let p = custom_gradient(value, &[&x, &y], |g| Ok(vec![Some(g.clone()), None])).unwrap();
    let c = checkpoint(&[&p], &[], |a| tanh(&a[0])).unwrap();
    c.retain_grad(true).unwrap();
    let loss = sum(&c).unwrap();

    let dot = to_dot(&loss).unwrap();
    let custom = statement(&dot, &node_id(&p));
    assert!(
        custom.contains("custom VJP") && custom.contains("hexagon"),
        "{custom}"
    );
    let ck = statement(&dot, &node_id(&c));
    assert!(
        ck.contains("checkpoint") && ck.contains("doubleoctagon"),
        "{ck}"
    );
    assert!(ck.contains("[retains grad]"), "{ck}");
    assert!(!dot.contains("[released]"));

    loss.backward().unwrap();
    let after = to_dot(&loss).unwrap();
    let root = statement(&after, &node_id(&loss));
    assert!(
        root.contains("[released]") && root.contains("dashed"),
        "{root}"
    );
    // a released node holds no inputs: the drawing stops at it
    let (nodes, edges) = parse(&after);
    assert_eq!((nodes.len(), edges.len()), (1, 0), "{after}");
    // leaves now show their gradient, the retained result its own
    let before_release = {
        let x2 = t(&[1.0, 2.0], &[2]);
        let h = tanh(&x2).unwrap();
        h.retain_grad(true).unwrap();
        let l = sum(&h).unwrap();
        l.backward_with(None, true).unwrap();
        to_dot(&l)
            .unwrap()
            .replace(&node_id(&h), "TANH")
            .replace(&format!("t{}", x2.id()), "X")
    };
    assert!(
        statement(&before_release, "X").contains("grad: (2)"),
        "{before_release}"
    );
    assert!(
        statement(&before_release, "TANH").contains("[retains grad: (2)]"),
        "{before_release}"
    );
}

#[test]
fn a_leaf_alone_is_one_node() {
    let x = t(&[1.0], &[1]);
    let (nodes, edges) = parse(&to_dot(&x).unwrap());
    assert_eq!((nodes.len(), edges.len()), (1, 0));
}

#[test]
fn a_node_displays_its_name_id_and_release() {
    let x = t(&[1.0, 2.0], &[2]);
    let loss = sum(&tanh(&x).unwrap()).unwrap();
    let node = loss.autograd_ctx().unwrap();
    assert_eq!(node.to_string(), format!("sum node#{}", node.id().get()));
    loss.backward().unwrap();
    assert_eq!(
        node.to_string(),
        format!("sum node#{} (released)", node.id().get())
    );
    assert!(format!("{node:?}").starts_with("sum (recorded at "));
}

/// `sum(tanh(x) + tanh(y) * x)`: sum, add, mul once each, tanh twice.
fn known(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    sum(&add(&tanh(x)?, &mul(&tanh(y)?, x)?)?)
}

#[test]
fn the_profile_names_every_op_with_its_calls_and_changes_no_gradient() {
    let x = t(&[0.1, 0.2, 0.3], &[3]);
    let y = t(&[0.4, -0.5, 0.6], &[3]);
    known(&x, &y).unwrap().backward().unwrap();
    let plain = (grad_vals(&x).unwrap(), grad_vals(&y).unwrap());
    x.set_grad(None).unwrap();
    y.set_grad(None).unwrap();

    let loss = known(&x, &y).unwrap();
    let profile = loss.backward_profiled(None, true).unwrap();
    assert_eq!(
        (grad_vals(&x).unwrap(), grad_vals(&y).unwrap()),
        plain,
        "profiling changes no gradient"
    );
    let mut calls: Vec<(String, usize)> =
        profile.ops().into_iter().map(|o| (o.op, o.calls)).collect();
    calls.sort();
    let expected: Vec<(String, usize)> = [("add", 1), ("mul", 1), ("sum", 1), ("tanh", 2)]
        .into_iter()
        .map(|(n, c)| (n.to_owned(), c))
        .collect();
    assert_eq!(calls, expected);
    assert_eq!(profile.nodes().len(), 5);
    // gradients produced: sum 3 floats, add 2×3, mul 2×3, each tanh 3 → 4 × (3 + 6 + 6 + 6)
    let bytes: usize = profile.ops().iter().map(|o| o.gradient_bytes).sum();
    assert_eq!(bytes, 4 * 21);
    assert!(profile.total() >= profile.nodes().iter().map(|n| n.time).sum());

    let table = profile.to_string();
    for op in ["op", "calls", "tanh", "mul", "add", "sum", "all"] {
        assert!(table.contains(op), "{table}");
    }

    let dot = to_dot_with_profile(&loss, &profile).unwrap();
    let root = statement(&dot, &node_id(&loss));
    assert!(
        root.contains("backward ") && root.contains(" B of gradients"),
        "{root}"
    );
    assert_eq!(dot.matches(" B of gradients").count(), 5, "{dot}");
}

#[test]
fn a_failed_profiled_traversal_reports_the_error_and_changes_nothing() {
    let x = t(&[0.1, 0.2], &[2]);
    let p = custom_gradient(t(&[1.0, 1.0], &[2]), &[&x], |_| Ok(vec![])).unwrap();
    let loss = sum(&p).unwrap();
    assert!(loss.backward_profiled(None, false).is_err());
    assert_eq!(grad_vals(&x), None);
}

#[test]
fn a_non_differentiable_input_is_a_grey_constant() {
    let table = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let ids = Tensor::from_vec(vec![1i64, 0, 1], autograd_core::shape![3]).unwrap();
    let rows = autograd_core::ops::index_select(&table, 0, &ids).unwrap();
    let dot = to_dot(&rows).unwrap();
    let constant = statement(&dot, &format!("t{}", ids.id()));
    assert!(
        constant.contains("constant") && constant.contains("grey"),
        "{constant}"
    );
    let (nodes, edges) = parse(&dot);
    assert_eq!((nodes.len(), edges.len()), (3, 2), "{dot}");
}
