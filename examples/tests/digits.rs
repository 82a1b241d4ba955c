//! The shipped digits file loads whole and well-formed, splits reproducibly, and bad lines are
//! refused with the line named.

use autograd_core::ErrorKind;
use autograd_examples::digits::{load, parse, shipped_path, CLASSES, FEATURES};
use autograd_examples::plot::{render, Panel, Series};

#[test]
fn the_shipped_file_has_1797_scaled_images_of_every_class() {
    let d = load(&shipped_path()).unwrap();
    assert_eq!(d.len(), 1797);
    assert_eq!(d.features.len(), 1797 * FEATURES);
    assert!(d.features.iter().all(|&p| (0.0..=1.0).contains(&p)));
    assert!(d.features.contains(&1.0), "16 scales to 1");
    let mut counts = [0usize; CLASSES];
    for &l in &d.labels {
        counts[l as usize] += 1;
    }
    // every class has between 174 and 183 images in this data set
    assert!(
        counts.iter().all(|&c| (174..=183).contains(&c)),
        "{counts:?}"
    );
    // the first image is a 0 whose first row is 0,0,5,13,9,1,0,0
    assert_eq!(d.labels[0], 0);
    let first: Vec<f32> = [0.0, 0.0, 5.0, 13.0, 9.0, 1.0, 0.0, 0.0]
        .iter()
        .map(|p| p / 16.0)
        .collect();
    assert_eq!(d.features[..8], first[..]);
}

#[test]
fn the_split_is_seeded_disjoint_and_complete() {
    let d = load(&shipped_path()).unwrap();
    let (train, test) = d.split(0.2, 7).unwrap();
    assert_eq!(test.len(), 359);
    assert_eq!(train.len() + test.len(), d.len());
    let (train2, test2) = d.split(0.2, 7).unwrap();
    assert_eq!(train.labels, train2.labels);
    assert_eq!(test.features, test2.features);
    let (_, other) = d.split(0.2, 8).unwrap();
    assert_ne!(other.features, test.features, "another seed, another split");
    let (x, y) = test.tensors().unwrap();
    assert_eq!(x.dims(), [359, FEATURES]);
    assert_eq!(y.dims(), [359]);
}

#[test]
fn malformed_lines_are_value_errors_naming_the_line() {
    let good = format!("{}0\n", "1,".repeat(FEATURES));
    assert_eq!(parse(&good).unwrap().len(), 1);
    let short = format!("{good}1,2,3\n");
    let err = parse(&short).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().contains("line 2"), "{err}");
    let bad_label = format!("{}10\n", "1,".repeat(FEATURES));
    assert_eq!(parse(&bad_label).unwrap_err().kind(), ErrorKind::Value);
    let bad_pixel = format!("17,{}3\n", "1,".repeat(FEATURES - 1));
    assert_eq!(parse(&bad_pixel).unwrap_err().kind(), ErrorKind::Value);
}

#[test]
fn the_svg_has_one_polyline_per_series_and_escapes_text() {
    let svg = render(&[Panel {
        title: "loss <train>".into(),
        x_label: "epoch".into(),
        y_label: "loss".into(),
        series: vec![
            Series {
                name: "train".into(),
                color: "#1f77b4".into(),
                points: vec![(0.0, 2.3), (1.0, 1.1), (2.0, f64::NAN), (3.0, 0.4)],
            },
            Series {
                name: "test".into(),
                color: "#ff7f0e".into(),
                points: vec![(0.0, 2.2), (3.0, 0.5)],
            },
        ],
    }]);
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert!(svg.contains("loss &lt;train&gt;"));
    assert!(!svg.contains("NaN"), "non-finite points are skipped");
}

#[test]
fn a_held_out_fraction_outside_the_unit_interval_or_a_missing_row_is_a_value_error() {
    let d = load(&shipped_path()).unwrap();
    for fraction in [1.5, -0.1, f64::NAN, f64::INFINITY] {
        let e = d.split(fraction, 0).unwrap_err();
        assert_eq!(e.kind(), autograd_core::ErrorKind::Value, "{fraction}: {e}");
    }
    let (train, test) = d.split(1.0, 0).unwrap();
    assert_eq!((train.len(), test.len()), (0, d.len()));
    let e = d.subset(&[0, d.len()]).unwrap_err();
    assert_eq!(e.kind(), autograd_core::ErrorKind::Value, "{e}");
    assert_eq!(
        d.subset(&[3, 0]).unwrap().labels,
        vec![d.labels[3], d.labels[0]]
    );
}
