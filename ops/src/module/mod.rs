//! Modules: structs whose tensors (parameters and buffers) and submodules are found by name,
//! as PyTorch's `nn.Module` finds them: `blocks.0.attn.qkv.weight`. Most modules derive the
//! trait; a module's state dict is what [`Module::visit`] reaches.

use std::path::Path;

use autograd_core::{Result, Tensor};

use crate::persist::{LoadOptions, LoadReport};

/// What a tensor of a module is to training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Trained: an optimizer updates it, and it is saved.
    Parameter,
    /// Saved but not trained (running statistics, say).
    Buffer,
}

/// A tree of named tensors and submodules, with a training mode that reaches every submodule.
/// Usually derived (`#[derive(Module)]`), which implements [`Field`] as well, so that a
/// module can be a field of another.
pub trait Module {
    /// Calls `f(name, tensor, role)` for every tensor of the module, in declaration order.
    /// Names are dotted paths (`blocks.0.attn.qkv.weight`, a `Vec`'s or array's elements
    /// numbered, an absent `Option` skipped) after `prefix` (empty for none).
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role));

    /// Puts the module and every submodule in training (`true`) or evaluation mode.
    fn set_training(&mut self, training: bool);

    /// Training mode: dropout drops, and every mode-dependent layer trains.
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode.
    fn eval(&mut self) {
        self.set_training(false);
    }

    /// Every parameter with its name, in declaration order.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.named(Role::Parameter)
    }

    /// Every parameter (handles: an optimizer over them trains the module's tensors).
    fn parameters(&self) -> Vec<Tensor> {
        self.named(Role::Parameter)
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Every buffer with its name.
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.named(Role::Buffer)
    }

    /// Every tensor a state dict holds (parameters and buffers) with its name and role.
    fn named_tensors(&self) -> Vec<(String, Tensor, Role)> {
        let mut all = Vec::new();
        self.visit("", &mut |name, t, role| {
            all.push((name.to_string(), t.clone(), role));
        });
        all
    }

    /// The number of parameter elements.
    fn num_parameters(&self) -> usize {
        let mut n = 0usize;
        self.visit("", &mut |_, t, role| {
            if role == Role::Parameter {
                n = n.saturating_add(t.size());
            }
        });
        n
    }

    /// Saves every tensor (parameters and buffers) to a safetensors file at `path`, by name,
    /// each row-major in its dtype. I/O failures are `Error::Runtime` naming the path.
    fn save(&self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        crate::persist::save_module(self, path.as_ref())
    }

    /// Loads a safetensors file saved from a module of this structure, strictly: every tensor
    /// by name, of its shape and a dtype it can take (see [`LoadOptions`]). Tensors are
    /// written in place under `no_grad`, so handles stay valid and graphs recorded before the
    /// load are refused by backward. On an error no tensor has changed.
    fn load(&mut self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        self.load_with(path, LoadOptions::default()).map(|_| ())
    }

    /// [`Module::load`] with options: a non-strict load loads the tensors both sides have and
    /// reports the rest.
    fn load_with(&mut self, path: impl AsRef<Path>, options: LoadOptions) -> Result<LoadReport>
    where
        Self: Sized,
    {
        crate::persist::load_module(self, path.as_ref(), options)
    }

    /// The tensors of one role with their names.
    #[doc(hidden)]
    fn named(&self, wanted: Role) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit("", &mut |name, t, role| {
            if role == wanted {
                out.push((name.to_string(), t.clone()));
            }
        });
        out
    }
}

/// A value a module field may hold: a tensor, a module, or a `Vec`, array, `Option` or `Box`
/// of them. `#[derive(Module)]` walks each field through this trait.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a field of a `#[derive(Module)]` struct",
    label = "not a tensor, a module, or a Vec/array/Option/Box of them",
    note = "mark plain data `#[module(skip)]`"
)]
pub trait Field {
    /// Calls `f` for every tensor under `path`; a tensor reports itself with `role` (the
    /// field's: a parameter unless marked `#[module(buffer)]`).
    fn visit_field(&self, path: &str, role: Role, f: &mut dyn FnMut(&str, &Tensor, Role));
    /// Sets the training mode of every module under this field.
    fn set_training_field(&mut self, training: bool);
}

/// `prefix.name`, or `name` when there is no prefix.
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

impl Field for Tensor {
    fn visit_field(&self, path: &str, role: Role, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        f(path, self, role);
    }
    fn set_training_field(&mut self, _: bool) {}
}

impl<T: Field> Field for Vec<T> {
    fn visit_field(&self, path: &str, role: Role, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        self.as_slice().visit_field(path, role, f);
    }
    fn set_training_field(&mut self, training: bool) {
        self.as_mut_slice().set_training_field(training);
    }
}

impl<T: Field, const N: usize> Field for [T; N] {
    fn visit_field(&self, path: &str, role: Role, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        self.as_slice().visit_field(path, role, f);
    }
    fn set_training_field(&mut self, training: bool) {
        self.as_mut_slice().set_training_field(training);
    }
}

impl<T: Field> Field for [T] {
    fn visit_field(&self, path: &str, role: Role, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        for (i, item) in self.iter().enumerate() {
            item.visit_field(&join(path, &i.to_string()), role, f);
        }
    }
    fn set_training_field(&mut self, training: bool) {
        for item in self {
            item.set_training_field(training);
        }
    }
}

impl<T: Field> Field for Option<T> {
    fn visit_field(&self, path: &str, role: Role, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        if let Some(item) = self {
            item.visit_field(path, role, f);
        }
    }
    fn set_training_field(&mut self, training: bool) {
        if let Some(item) = self {
            item.set_training_field(training);
        }
    }
}

impl<T: Field + ?Sized> Field for Box<T> {
    fn visit_field(&self, path: &str, role: Role, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        (**self).visit_field(path, role, f);
    }
    fn set_training_field(&mut self, training: bool) {
        (**self).set_training_field(training);
    }
}
