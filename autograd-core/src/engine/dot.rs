//! Seeing the graph: Graphviz DOT of the graph reachable from a tensor, optionally labelled
//! with a backward profile, and `Display` for a node handle.
//!
//! One DOT node per autograd node (`n<id>`) and per leaf tensor (`t<id>`); one edge per saved
//! input, from the consuming node to the node or leaf that produced the input (child to
//! parent, the direction backward walks). Custom-gradient and checkpoint nodes, released nodes,
//! leaves, constants and retained gradients are each drawn distinctly.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use crate::engine::checkpoint::CHECKPOINT;
use crate::engine::custom_gradient::CUSTOM_GRADIENT;
use crate::engine::profile::BackwardProfile;
use crate::engine::IdSet;
use crate::error::Result;
use crate::graph::op::{Node, Operation};
use crate::tensor::Tensor;

/// The graph reachable from `t` in Graphviz DOT (`dot -Tsvg`): op names and node ids, the
/// shape and dtype of each node's result and of each leaf, released nodes (dashed; their
/// inputs are gone, so the drawing stops there), leaves (boxes, with the shape of a `.grad`
/// they hold), non-differentiable constants (grey), retained gradients, and `custom_gradient`
/// (purple hexagon) and `checkpoint` (blue double octagon) nodes. Edges go from a node to the
/// producers of its inputs, labelled with the input's position.
///
/// ```
/// use autograd_core::{to_dot, ops::{mul, sum}, Tensor, shape};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], shape![2])?;
/// let y = sum(&mul(&x, &x)?)?;
/// let dot = to_dot(&y)?;
/// assert!(dot.starts_with("digraph autograd {"));
/// assert_eq!(dot.matches(" -> ").count(), 3); // sum -> mul, mul -> x twice
/// # Ok::<(), autograd_core::Error>(())
/// ```
pub fn to_dot(t: &Tensor) -> Result<String> {
    Ok(render(t, None))
}

/// [`to_dot`] with each node that ran in `profile` labelled with its backward time and the
/// bytes of gradients it produced, and shaded by its share of the traversal's time. Profile
/// with `retain_graph` to draw the graph afterwards.
pub fn to_dot_with_profile(t: &Tensor, profile: &BackwardProfile) -> Result<String> {
    Ok(render(t, Some(profile)))
}

/// What the walk learned of one node before drawing it.
struct Seen {
    node: Node,
    /// The shape and dtype of the result through which the node was first reached.
    result: String,
    root: bool,
    /// The marking of a result that retains its gradient (with the `.grad` it holds).
    retained: Option<String>,
}

fn render(t: &Tensor, profile: Option<&BackwardProfile>) -> String {
    let mut out = String::from("digraph autograd {\n  node [fontname=\"monospace\"];\n");
    let Some((root, _)) = t.autograd_result() else {
        draw_leaf(&mut out, t, true);
        out.push_str("}\n");
        return out;
    };
    let mut nodes: Vec<Seen> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut leaves = IdSet::default();
    let mut edges = String::new();
    let mut leaf_lines = String::new();
    let mut stack = vec![0usize];
    index.insert(root.id().get(), 0);
    nodes.push(Seen {
        node: root,
        result: describe(t),
        root: true,
        retained: retained(t),
    });
    while let Some(i) = stack.pop() {
        let from = nodes[i].node.id().get();
        for (j, input) in nodes[i].node.inputs().iter().enumerate() {
            let Some((producer, k)) = input.autograd_result() else {
                if leaves.insert(input.id()) {
                    draw_leaf(&mut leaf_lines, input, false);
                }
                let _ = writeln!(edges, "  n{from} -> t{} [label=\"{j}\"];", input.id());
                continue;
            };
            let key = producer.id().get();
            let to = *index.entry(key).or_insert_with(|| {
                nodes.push(Seen {
                    node: producer,
                    result: describe(input),
                    root: false,
                    retained: None,
                });
                stack.push(nodes.len() - 1);
                nodes.len() - 1
            });
            if nodes[to].retained.is_none() {
                nodes[to].retained = retained(input);
            }
            let result = if k == 0 {
                String::new()
            } else {
                format!(" (result {k})")
            };
            let _ = writeln!(edges, "  n{from} -> n{key} [label=\"{j}{result}\"];");
        }
    }
    let busiest = profile
        .and_then(|p| p.nodes().iter().map(|n| n.time).max())
        .unwrap_or_default();
    for seen in &nodes {
        draw_node(&mut out, seen, profile, busiest);
    }
    out.push_str(&leaf_lines);
    out.push_str(&edges);
    out.push_str("}\n");
    out
}

/// `[2, 3] float32`-style description of a tensor.
fn describe(t: &Tensor) -> String {
    format!("{} {}", t.shape(), t.dtype())
}

/// The marking of a non-leaf tensor that retains its gradient, `None` when it does not.
fn retained(t: &Tensor) -> Option<String> {
    if !t.retains_grad() {
        return None;
    }
    Some(match &t.state().grad {
        Some(g) => format!("\\n[retains grad: {}]", escape(&g.shape().to_string())),
        None => "\\n[retains grad]".to_owned(),
    })
}

fn draw_node(
    out: &mut String,
    seen: &Seen,
    profile: Option<&BackwardProfile>,
    busiest: std::time::Duration,
) {
    let node = &*seen.node;
    let mut label = format!(
        "{}\\n{}\\nout {}",
        escape(node.name()),
        node.id(),
        escape(&seen.result)
    );
    let mut attrs = String::new();
    match node.name() {
        CUSTOM_GRADIENT => {
            label.push_str("\\n[custom VJP]");
            attrs.push_str(", shape=hexagon, color=purple, penwidth=2");
        }
        CHECKPOINT => {
            label.push_str("\\n[checkpoint: replayed in backward]");
            attrs.push_str(", shape=doubleoctagon, color=blue, penwidth=2");
        }
        _ => attrs.push_str(", shape=ellipse"),
    }
    if seen.root {
        label.push_str("\\n[root]");
    }
    if let Some(marking) = &seen.retained {
        label.push_str(marking);
    }
    let mut styles = Vec::new();
    if node.is_released() {
        label.push_str("\\n[released]");
        styles.push("dashed");
    }
    if let Some(p) = profile.and_then(|p| p.node(node.id())) {
        let _ = write!(
            label,
            "\\nbackward {:.1} µs, {} B of gradients",
            p.time.as_secs_f64() * 1e6,
            p.gradient_bytes
        );
        if !busiest.is_zero() {
            // white to red by share of the slowest node's time
            let heat = (p.time.as_secs_f64() / busiest.as_secs_f64()).clamp(0.0, 1.0);
            let gb = (255.0 * (1.0 - 0.7 * heat)) as u8;
            let _ = write!(attrs, ", fillcolor=\"#ff{gb:02x}{gb:02x}\"");
            styles.push("filled");
        }
    }
    if !styles.is_empty() {
        let _ = write!(attrs, ", style=\"{}\"", styles.join(","));
    }
    let _ = writeln!(out, "  n{} [label=\"{label}\"{attrs}];", node.id().get());
}

fn draw_leaf(out: &mut String, t: &Tensor, root: bool) {
    let mut label = if t.is_differentiable() {
        format!("leaf\\n{}", escape(&describe(t)))
    } else {
        format!("constant\\n{}", escape(&describe(t)))
    };
    if root {
        label.push_str("\\n[root]");
    }
    let mut attrs = String::from(", shape=box");
    if t.is_differentiable() {
        if let Some(g) = &t.state().grad {
            let _ = write!(label, "\\ngrad: {}", escape(&g.shape().to_string()));
        }
    } else {
        attrs.push_str(", color=grey, fontcolor=grey");
    }
    let _ = writeln!(out, "  t{} [label=\"{label}\"{attrs}];", t.id());
}

/// `s` inside a DOT double-quoted string.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A node handle as one line: op name, identity and whether it was released.
///
/// ```
/// use autograd_core::{ops::mul, Tensor, shape};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], shape![2])?;
/// let node = mul(&x, &x)?.autograd_ctx().unwrap();
/// assert_eq!(node.to_string(), format!("mul {}", node.id()));
/// # Ok::<(), autograd_core::Error>(())
/// ```
impl fmt::Display for dyn Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name(), self.id())?;
        if self.is_released() {
            f.write_str(" (released)")?;
        }
        Ok(())
    }
}
