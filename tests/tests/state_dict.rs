//! State dicts in safetensors files (issue 37 item 2): round trips bit for bit, in-place loads
//! that bump versions, strict and non-strict name matching, dtype conversions, and bad files
//! that give errors and change no tensor.

use std::path::{Path, PathBuf};

use autograd_core::ops::{mean, mul};
use autograd_core::{ErrorKind, Rng, Tensor};
use autograd_ops::module::join;
use autograd_ops::persist::{LoadOptions, LoadReport};
use autograd_ops::{Linear, Module, Role};

/// Visits a `Linear`'s weight and bias under `prefix.name`.
fn visit_linear(prefix: &str, name: &str, l: &Linear, f: &mut dyn FnMut(&str, &Tensor, Role)) {
    let p = join(prefix, name);
    f(&join(&p, "weight"), l.weight(), Role::Parameter);
    if let Some(b) = l.bias() {
        f(&join(&p, "bias"), b, Role::Parameter);
    }
}

/// Two layers and an Int64 buffer, implementing `Module` by hand.
struct Net {
    fc1: Linear,
    fc2: Linear,
    steps: Tensor,
}

impl Net {
    fn new(seed: u64) -> Net {
        let mut rng = Rng::new(seed);
        Net {
            fc1: Linear::new(4, 6, true, &mut rng).unwrap(),
            fc2: Linear::new(6, 3, false, &mut rng).unwrap(),
            steps: Tensor::from_vec(vec![seed as i64, 7], vec![2usize]).unwrap(),
        }
    }
}

impl Module for Net {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        visit_linear(prefix, "fc1", &self.fc1, f);
        visit_linear(prefix, "fc2", &self.fc2, f);
        f(&join(prefix, "steps"), &self.steps, Role::Buffer);
    }
    fn set_training(&mut self, _: bool) {}
}

/// One tensor, any layout.
struct One(Tensor);

impl Module for One {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        f(&join(prefix, "w"), &self.0, Role::Parameter);
    }
    fn set_training(&mut self, _: bool) {}
}

/// Every tensor's values as bits (floats) or integers, by name.
fn snapshot(m: &dyn Module) -> Vec<(String, Vec<u64>)> {
    m.named_tensors()
        .into_iter()
        .map(|(name, t, _)| {
            let v = match t.dtype() {
                autograd_core::DType::Float32 => t
                    .values::<f32>()
                    .unwrap()
                    .iter()
                    .map(|x| u64::from(x.to_bits()))
                    .collect(),
                autograd_core::DType::Float64 => t
                    .values::<f64>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect(),
                _ => t
                    .values::<i64>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as u64)
                    .collect(),
            };
            (name, v)
        })
        .collect()
}

fn versions(m: &dyn Module) -> Vec<u64> {
    m.named_tensors()
        .iter()
        .map(|(_, t, _)| t.carrier().unwrap().version())
        .collect()
}

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A file from a raw header and data section.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

// ---- round trips --------------------------------------------------------------------

#[test]
fn round_trip_restores_every_parameter_and_buffer_bit_for_bit() {
    let d = dir();
    let path = d.path().join("net.safetensors");
    let a = Net::new(1);
    a.save(&path).unwrap();
    let mut b = Net::new(2);
    assert_ne!(snapshot(&a), snapshot(&b));
    b.load(&path).unwrap();
    assert_eq!(snapshot(&a), snapshot(&b));
    assert_eq!(b.steps.dtype(), &autograd_core::DType::Int64);
}

#[test]
fn every_simple_dtype_round_trips_including_scalars_and_empty_tensors() {
    struct All(Vec<Tensor>);
    impl Module for All {
        fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
            for (i, t) in self.0.iter().enumerate() {
                f(&join(prefix, &i.to_string()), t, Role::Buffer);
            }
        }
        fn set_training(&mut self, _: bool) {}
    }
    let make = |k: i32| {
        All(vec![
            Tensor::from_vec(vec![1.5f64 * f64::from(k), -0.0], vec![2usize]).unwrap(),
            Tensor::from_vec(vec![k, -k, 3], vec![3usize]).unwrap(),
            Tensor::from_vec(vec![k == 1, true, false], vec![3usize]).unwrap(),
            Tensor::scalar(k as f32 * 0.25),
            Tensor::from_vec(Vec::<f32>::new(), vec![0usize, 4]).unwrap(),
        ])
    };
    let d = dir();
    let path = d.path().join("all.safetensors");
    let a = make(1);
    a.save(&path).unwrap();
    let mut b = make(2);
    b.load(&path).unwrap();
    assert_eq!(b.0[0].values::<f64>().unwrap(), vec![1.5, -0.0]);
    assert_eq!(b.0[1].values::<i32>().unwrap(), vec![1, -1, 3]);
    assert_eq!(b.0[2].values::<bool>().unwrap(), vec![true, true, false]);
    assert_eq!(b.0[3].values::<f32>().unwrap(), vec![0.25]);
    assert_eq!(b.0[4].dims(), vec![0, 4]);
}

#[test]
fn a_strided_view_is_saved_compacted_in_row_major_order() {
    let base = Tensor::from_vec((0..6).map(|i| i as f32).collect(), vec![2usize, 3]).unwrap();
    let viewed = One(base.transpose(0, 1).unwrap()); // [3, 2], column-major over base
    let d = dir();
    let path = d.path().join("t.safetensors");
    viewed.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    // 6 F32 values after the header, in the view's logical order
    let data: Vec<f32> = bytes[bytes.len() - 24..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(data, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let mut back = One(Tensor::zeros(vec![3usize, 2], &autograd_core::DType::Float32).unwrap());
    back.load(&path).unwrap();
    assert_eq!(back.0.values::<f32>().unwrap(), data);
}

#[test]
fn load_writes_in_place_so_handles_stay_and_a_graph_recorded_before_is_refused() {
    let d = dir();
    let path = d.path().join("net.safetensors");
    Net::new(1).save(&path).unwrap();
    let mut net = Net::new(2);
    let handle = net.fc1.weight().clone();
    let before = versions(&net);
    let x = Tensor::ones(vec![2usize, 4], &autograd_core::DType::Float32).unwrap();
    let y = net.fc1.forward(&x).unwrap();
    let loss = mean(&mul(&y, &y).unwrap()).unwrap();
    net.load(&path).unwrap();
    assert!(handle.same_tensor(net.fc1.weight()));
    assert_eq!(
        snapshot(&One(handle.clone()))[0].1,
        snapshot(&Net::new(1))[0].1
    );
    for (b, a) in before.iter().zip(versions(&net)) {
        assert!(a > *b, "every loaded tensor's version moves on");
    }
    let e = loss.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert!(e.to_string().contains("in-place modification"), "{e}");
    // a graph recorded after the load trains as usual
    let y = net.fc1.forward(&x).unwrap();
    mean(&mul(&y, &y).unwrap()).unwrap().backward().unwrap();
    assert!(net.fc1.weight().grad().unwrap().is_some());
}

// ---- names --------------------------------------------------------------------------

/// `Net` without its second layer, with an extra tensor.
struct Other {
    fc1: Linear,
    extra: Tensor,
}

impl Module for Other {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        visit_linear(prefix, "fc1", &self.fc1, f);
        f(&join(prefix, "extra"), &self.extra, Role::Parameter);
    }
    fn set_training(&mut self, _: bool) {}
}

fn other() -> Other {
    Other {
        fc1: Linear::new(4, 6, true, &mut Rng::new(9)).unwrap(),
        extra: Tensor::ones(vec![2usize], &autograd_core::DType::Float32).unwrap(),
    }
}

#[test]
fn strict_load_names_missing_and_unexpected_keys_and_changes_nothing() {
    let d = dir();
    let path = d.path().join("net.safetensors");
    Net::new(1).save(&path).unwrap();
    let mut o = other();
    let before = snapshot(&o);
    let e = o.load(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let msg = e.to_string();
    for needle in ["`extra`", "`fc2.weight`", "`steps`", "strict: false"] {
        assert!(msg.contains(needle), "`{msg}` lacks {needle}");
    }
    assert_eq!(snapshot(&o), before);
}

#[test]
fn non_strict_load_reports_missing_and_unexpected_keys_and_loads_the_rest() {
    let d = dir();
    let path = d.path().join("net.safetensors");
    let net = Net::new(1);
    net.save(&path).unwrap();
    let mut o = other();
    let report = o
        .load_with(
            &path,
            LoadOptions {
                strict: false,
                ..LoadOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        report,
        LoadReport {
            missing: vec!["extra".into()],
            unexpected: vec!["fc2.weight".into(), "steps".into()],
        }
    );
    assert_eq!(snapshot(&o)[..2], snapshot(&net)[..2]);
    assert_eq!(o.extra.values::<f32>().unwrap(), vec![1.0, 1.0]);
}

// ---- dtypes -------------------------------------------------------------------------

#[test]
fn f16_and_bf16_entries_load_into_float32_parameters() {
    let d = dir();
    // F16 1.5, -2.0, 0.5, 2^-24 (subnormal); BF16 1.5, -3.0
    let mut data = Vec::new();
    for h in [0x3E00u16, 0xC000, 0x3800, 0x0001] {
        data.extend_from_slice(&h.to_le_bytes());
    }
    let f16 = write(
        d.path(),
        "f16.safetensors",
        &raw(
            r#"{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}"#,
            &data,
        ),
    );
    let mut m = One(Tensor::zeros(vec![2usize, 2], &autograd_core::DType::Float32).unwrap());
    m.load(&f16).unwrap();
    assert_eq!(
        m.0.values::<f32>().unwrap(),
        vec![1.5, -2.0, 0.5, 2f32.powi(-24)]
    );
    let mut data = Vec::new();
    for h in [0x3FC0u16, 0xC040] {
        data.extend_from_slice(&h.to_le_bytes());
    }
    let bf16 = write(
        d.path(),
        "bf16.safetensors",
        &raw(
            r#"{"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}"#,
            &data,
        ),
    );
    let mut m = One(Tensor::zeros(vec![2usize], &autograd_core::DType::Float32).unwrap());
    m.load(&bf16).unwrap();
    assert_eq!(m.0.values::<f32>().unwrap(), vec![1.5, -3.0]);
}

#[test]
fn f64_and_f32_convert_only_when_asked() {
    let d = dir();
    let path = d.path().join("f64.safetensors");
    One(Tensor::from_vec(vec![0.1f64, 2.0], vec![2usize]).unwrap())
        .save(&path)
        .unwrap();
    let mut m = One(Tensor::zeros(vec![2usize], &autograd_core::DType::Float32).unwrap());
    let e = m.load(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    assert!(e.to_string().contains("convert_f64"), "{e}");
    assert_eq!(m.0.values::<f32>().unwrap(), vec![0.0, 0.0]);
    let convert = LoadOptions {
        convert_f64: true,
        ..LoadOptions::default()
    };
    m.load_with(&path, convert).unwrap();
    assert_eq!(m.0.values::<f32>().unwrap(), vec![0.1f32, 2.0]);
    // and back: an F32 file into a Float64 tensor
    m.save(&path).unwrap();
    let mut m64 = One(Tensor::zeros(vec![2usize], &autograd_core::DType::Float64).unwrap());
    assert_eq!(m64.load(&path).unwrap_err().kind(), ErrorKind::Type);
    m64.load_with(&path, convert).unwrap();
    assert_eq!(m64.0.values::<f64>().unwrap(), vec![f64::from(0.1f32), 2.0]);
}

// ---- bad files ----------------------------------------------------------------------

/// Loads `bytes` into a fresh `Net`, expects an error of `kind` mentioning `needle`, and
/// checks that no tensor changed (values and versions).
#[track_caller]
fn refused(bytes: &[u8], kind: ErrorKind, needle: &str) {
    let d = dir();
    let path = write(d.path(), "bad.safetensors", bytes);
    let mut net = Net::new(5);
    let (before, vers) = (snapshot(&net), versions(&net));
    let e = net.load(&path).unwrap_err();
    assert_eq!(e.kind(), kind, "{e}");
    assert!(e.to_string().contains(needle), "`{e}` lacks `{needle}`");
    assert_eq!(snapshot(&net), before);
    assert_eq!(versions(&net), vers);
}

/// A valid file of `Net::new(1)`.
fn good_bytes() -> Vec<u8> {
    let d = dir();
    let path = d.path().join("net.safetensors");
    Net::new(1).save(&path).unwrap();
    std::fs::read(path).unwrap()
}

fn header_len(bytes: &[u8]) -> usize {
    u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
}

#[test]
fn a_file_of_zero_bytes_is_refused() {
    refused(&[], ErrorKind::Value, "8-byte header length");
}

#[test]
fn a_truncated_file_is_refused() {
    let good = good_bytes();
    refused(&good[..good.len() - 3], ErrorKind::Value, "outside");
    refused(&good[..12], ErrorKind::Value, "exceeds");
}

#[test]
fn a_wrong_header_length_is_refused() {
    let mut bad = good_bytes();
    let n = header_len(&bad) as u64;
    bad[..8].copy_from_slice(&(n + 1_000_000).to_le_bytes());
    refused(&bad, ErrorKind::Value, "exceeds");
    // shorter: the header's end (past its space padding) is cut off
    bad[..8].copy_from_slice(&(n - 20).to_le_bytes());
    refused(&bad, ErrorKind::Value, "not valid JSON");
    bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    refused(&bad, ErrorKind::Value, "exceeds");
}

#[test]
fn invalid_json_is_refused() {
    refused(
        &raw("{\"w\": [1, 2", &[]),
        ErrorKind::Value,
        "not valid JSON",
    );
    refused(&raw("[1, 2]      ", &[]), ErrorKind::Value, "JSON object");
    refused(&raw("{\"a\": 1}", &[]), ErrorKind::Value, "no `dtype`");
}

#[test]
fn overlapping_offsets_are_refused() {
    let header = r#"{"fc1.weight":{"dtype":"F32","shape":[6,4],"data_offsets":[0,96]},"fc1.bias":{"dtype":"F32","shape":[6],"data_offsets":[80,104]}}"#;
    refused(&raw(header, &[0; 104]), ErrorKind::Value, "overlaps");
}

#[test]
fn a_name_that_appears_twice_is_refused() {
    let header = r#"{"fc1.bias":{"dtype":"F32","shape":[6],"data_offsets":[0,24]},"fc1.bias":{"dtype":"F32","shape":[6],"data_offsets":[24,48]}}"#;
    refused(&raw(header, &[0; 48]), ErrorKind::Value, "appears twice");
}

#[test]
fn a_shape_that_disagrees_with_the_data_length_is_refused() {
    let header = r#"{"fc1.bias":{"dtype":"F32","shape":[7],"data_offsets":[0,24]}}"#;
    refused(&raw(header, &[0; 24]), ErrorKind::Value, "needs 28 bytes");
}

#[test]
fn a_shape_that_disagrees_with_the_module_is_refused() {
    let mut good = good_bytes();
    let n = header_len(&good);
    let header = String::from_utf8(good[8..8 + n].to_vec()).unwrap();
    // same byte count, other shape: [6, 4] -> [4, 6]
    let swapped = header.replace("\"shape\":[6,4]", "\"shape\":[4,6]");
    assert_ne!(swapped, header);
    good.splice(8..8 + n, swapped.bytes());
    refused(
        &good,
        ErrorKind::Value,
        "has shape [4, 6] in the file but [6, 4]",
    );
}

#[test]
fn a_dtype_the_parameter_cannot_take_is_refused() {
    let mut good = good_bytes();
    let n = header_len(&good);
    let header = String::from_utf8(good[8..8 + n].to_vec()).unwrap();
    // the Int64 buffer's entry relabelled F64: a float into an integer tensor
    let relabelled = header.replacen("\"I64\"", "\"F64\"", 1);
    assert_ne!(relabelled, header);
    good.splice(8..8 + n, relabelled.bytes());
    refused(&good, ErrorKind::Type, "is F64 in the file but Int64");
}

#[test]
fn a_bad_entry_after_good_ones_changes_no_tensor() {
    // every tensor of Net present and valid except the last, whose dtype is I32
    let good = good_bytes();
    let n = header_len(&good);
    let header = String::from_utf8(good[8..8 + n].to_vec()).unwrap();
    let bad = header.replacen(
        "\"dtype\":\"I64\",\"shape\":[2]",
        "\"dtype\":\"I32\",\"shape\":[4]",
        1,
    );
    assert_ne!(bad, header);
    let mut bytes = good.clone();
    bytes.splice(8..8 + n, bad.bytes());
    refused(
        &bytes,
        ErrorKind::Value,
        "has shape [4] in the file but [2]",
    );
}

#[test]
fn a_missing_file_is_a_runtime_error_naming_the_path() {
    let d = dir();
    let path = d.path().join("nope.safetensors");
    let e = Net::new(1).load(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.to_string().contains("nope.safetensors"), "{e}");
}
