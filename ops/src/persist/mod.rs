//! Saving and loading in safetensors files, the format PyTorch, candle and Hugging Face use: a
//! module's state dict ([`crate::Module::save`], [`crate::Module::load`]), an optimizer's state
//! by parameter name (`Sgd::save_state`, `AdamW::save_state`) and a generator's state
//! ([`save_rng`], [`load_rng`]). Every load validates the whole file before it changes anything.
//!
//! ```
//! use autograd_core::{Rng, Tensor};
//! use autograd_ops::{Linear, Module, Role};
//! # use autograd_ops::persist::LoadOptions;
//! struct Net { fc: Linear }
//! impl Module for Net {
//!     fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
//!         let p = autograd_ops::module::join(prefix, "fc");
//!         f(&autograd_ops::module::join(&p, "weight"), self.fc.weight(), Role::Parameter);
//!     }
//!     fn set_training(&mut self, _: bool) {}
//! }
//! let dir = std::env::temp_dir().join(format!("persist-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let path = dir.join("net.safetensors");
//! let a = Net { fc: Linear::new(3, 2, false, &mut Rng::new(0))? };
//! a.save(&path)?;
//! let mut b = Net { fc: Linear::new(3, 2, false, &mut Rng::new(1))? };
//! b.load(&path)?;
//! assert_eq!(a.fc.weight().to_vec::<f32>()?, b.fc.weight().to_vec::<f32>()?);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod optimizer_state;
mod safetensors;
mod state_dict;
mod stream;

pub use optimizer_state::{load_rng, save_rng};
pub use safetensors::{contents, EntryInfo};
#[cfg(feature = "mpi")]
pub(crate) use state_dict::check_load;
pub use state_dict::{load_module, save_module, LoadOptions, LoadReport};
