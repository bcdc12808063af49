//! Where two JSON values differ, leaf by leaf, for messages that refuse to resume a run with
//! other settings (`train.lr: 0.001 vs 0.01`).

use serde_json::Value;

/// Appends `path: a vs b` for every leaf in which `a` and `b` differ (objects compared key by
/// key, a missing key as `null`, anything else as a whole; values longer than 40 characters
/// cut with `…`). `path` prefixes the keys (`""` for none).
pub fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    for (at, a, b) in leaves(path, a, b) {
        out.push(format!("{at}: {} vs {}", short(a), short(b)));
    }
}

/// The leaves in which `a` and `b` differ, as `(path, a's, b's)`, compared as [`differences`]
/// compares them.
pub fn leaves<'v>(path: &str, a: &'v Value, b: &'v Value) -> Vec<(String, &'v Value, &'v Value)> {
    let mut out = Vec::new();
    walk(path, a, b, &mut out);
    out
}

fn walk<'v>(path: &str, a: &'v Value, b: &'v Value, out: &mut Vec<(String, &'v Value, &'v Value)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                walk(&at, x.get(key).unwrap_or(&Value::Null), y.get(key).unwrap_or(&Value::Null), out);
            }
        }
        (a, b) if a != b => out.push((path.to_string(), a, b)),
        _ => {}
    }
}

/// `v` as JSON, cut to 40 characters.
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.chars().count() > 40 {
        true => format!("{}…", text.chars().take(40).collect::<String>()),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_that_differ_are_named_by_their_path() {
        let a = serde_json::json!({ "train": { "lr": 0.001, "seed": 1 }, "kind": "redrafter" });
        let b = serde_json::json!({ "train": { "lr": 0.01, "seed": 1, "extra": true }, "kind": "redrafter" });
        let mut out = Vec::new();
        differences("", &a, &b, &mut out);
        assert_eq!(out, ["train.extra: null vs true", "train.lr: 0.001 vs 0.01"]);
        let mut out = Vec::new();
        differences("sampling", &Value::Null, &serde_json::json!({ "temperature": 0.7 }), &mut out);
        assert_eq!(out, [r#"sampling: null vs {"temperature":0.7}"#]);
    }
}
