//! Eureka's XML, written from the JSON shape of an answer: what a client gets unless it
//! asks for JSON (`Accept` naming `json`), as Eureka's own server answers by default —
//! `py_eureka_client` reads the registry as XML and sends no `Accept`.
//!
//! The JSON shape maps one to one, as Eureka's two codecs have it: an object is an
//! element, its `@`-keys its attributes and `$` its text; an array repeats its element
//! (`application`, `instance`); `overriddenStatus` is spelled `overriddenstatus`. A
//! metadata key that is no XML name is left out (Eureka's own XML cannot hold it either).

use serde_json::Value;

/// Whether an answer to a request accepting `accept` is XML.
pub fn wanted(accept: Option<&str>) -> bool {
    !accept.is_some_and(|a| a.to_ascii_lowercase().contains("json"))
}

/// `root` (an object of one key, the root element) as an XML document.
pub fn document(root: &Value) -> String {
    let mut out = String::from(r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#);
    if let Value::Object(map) = root {
        for (name, value) in map {
            element(&mut out, name, value);
        }
    }
    out
}

/// Whether `name` is an XML name (ASCII letters, digits, `-`, `_`, `.`; not a digit,
/// `-` or `.` first).
fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `value` as an attribute's or an element's text.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn escape(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
}

fn element(out: &mut String, name: &str, value: &Value) {
    let name = if name == "overriddenStatus" {
        "overriddenstatus"
    } else {
        name
    };
    if !is_name(name) {
        return;
    }
    if let Value::Array(items) = value {
        for item in items {
            element(out, name, item);
        }
        return;
    }
    out.push('<');
    out.push_str(name);
    let Value::Object(map) = value else {
        out.push('>');
        escape(out, &text(value));
        out.push_str("</");
        out.push_str(name);
        out.push('>');
        return;
    };
    for (key, v) in map {
        if let Some(attribute) = key.strip_prefix('@').filter(|a| is_name(a)) {
            out.push(' ');
            out.push_str(attribute);
            out.push_str("=\"");
            escape(out, &text(v));
            out.push('"');
        }
    }
    out.push('>');
    for (key, v) in map.iter().filter(|(k, _)| !k.starts_with('@')) {
        if key == "$" {
            escape(out, &text(v));
        } else {
            element(out, key, v);
        }
    }
    out.push_str("</");
    out.push_str(name);
    out.push('>');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_asked_for_else_xml_is_answered() {
        assert!(!wanted(Some("application/json")));
        assert!(!wanted(Some("application/JSON;q=0.9, application/xml")));
        assert!(wanted(Some("application/xml")));
        assert!(wanted(Some("*/*")));
        assert!(wanted(None));
    }

    #[test]
    fn the_json_shape_maps_to_eurekas_xml() {
        let doc = json!({"applications": {
            "apps__hashcode": "UP_1_",
            "application": [{"name": "A", "instance": [{
                "port": {"$": 8080, "@enabled": "true"},
                "overriddenStatus": "UNKNOWN",
                "metadata": {"zone": "a<b", "1bad": "x", "k v": "y"},
            }]}],
        }});
        let xml = document(&doc);
        assert_eq!(
            xml,
            concat!(
                r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#,
                "<applications><application><instance>",
                "<metadata><zone>a&lt;b</zone></metadata>",
                "<overriddenstatus>UNKNOWN</overriddenstatus>",
                r#"<port enabled="true">8080</port>"#,
                "</instance><name>A</name></application>",
                "<apps__hashcode>UP_1_</apps__hashcode></applications>"
            )
        );
    }
}
