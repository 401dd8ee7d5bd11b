//! Consul's `?filter=` expressions: the subset of HashiCorp's go-bexpr language that Consul's
//! HTTP API documents, parsed once and evaluated over `serde_json::Value` answer entries.
//!
//! Served: `or`, `and`, `not` and parentheses (precedence `not` > `and` > `or`; keywords are
//! lowercase and case-sensitive); the match operators `==`, `!=`, `in`, `not in`, `contains`,
//! `not contains`, `is empty`, `is not empty`, `matches` and `not matches`; selectors written as
//! dotted names (`Service.Meta.version`, letters/digits/`_`, starting with a letter), with
//! bracketed keys (`Service.Meta["some-key"]`) and numeric array indexes (`Service.Tags.0`);
//! values written as double-quoted strings (escapes `\"`, `\\`, `\n`, `\t`, `\r`), backtick raw
//! strings, numbers or bare words. `matches` takes a regular expression in a subset of Go's RE2
//! syntax (see `Pattern`) run by a bounded backtracking matcher.
//!
//! Not served: bexpr's JSON-pointer selectors (`"/Service/Meta"`), inline value-list selectors
//! (`["a", "b"]`), typed comparisons beyond text equality, and regular-expression flags, named
//! groups, Unicode/POSIX classes and `\Q…\E`; these are rejected by `Filter::parse` with a message.
//! Expressions over 4096 bytes or nesting deeper than 32 levels are rejected too, so hostile input
//! costs bounded memory and stack.

use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashSet;

mod parse;
mod pattern;

use parse::*;
use pattern::*;

/// Longest expression [`Filter::parse`] accepts, in bytes.
const MAX_EXPR_BYTES: usize = 4096;
/// Deepest nesting of parentheses and `not` (counted together) that [`Filter::parse`] accepts.
const MAX_DEPTH: usize = 32;
/// Instructions a `matches` evaluation may execute before it gives up and reports no match.
const STEP_BUDGET: usize = 100_000;
/// Largest compiled regular expression, in instructions (`a{1000}{1000}` must not explode).
const MAX_PROGRAM: usize = 10_000;
/// Largest count in a `{n,m}` repetition, as in Go.
const MAX_REPEAT: u32 = 1000;

/// A parsed filter expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    expr: Expr,
}

impl Filter {
    /// Parses `expr`; `Err` is a message a person can act on, e.g. "unexpected ')' at 17" or
    /// "unknown operator 'equals' at 9". Positions are 1-based character columns.
    pub fn parse(expr: &str) -> Result<Filter, String> {
        if expr.len() > MAX_EXPR_BYTES {
            return Err(format!(
                "filter is {} bytes long; the limit is {MAX_EXPR_BYTES}",
                expr.len()
            ));
        }
        let mut parser = Parser {
            src: expr,
            bytes: expr.as_bytes(),
            pos: 0,
            depth: 0,
        };
        parser.skip_ws();
        if parser.peek().is_none() {
            return Err("empty filter expression".to_string());
        }
        let parsed = parser.parse_or()?;
        parser.skip_ws();
        if parser.peek().is_some() {
            return Err(format!(
                "{}; expected 'and', 'or' or the end of the filter",
                parser.unexpected(parser.pos)
            ));
        }
        Ok(Filter { expr: parsed })
    }

    /// Whether `doc` (one entry of an answer, a JSON object) passes.
    pub fn matches(&self, doc: &Value) -> bool {
        self.expr.eval(doc)
    }
}

/// The expression tree. `and`/`or` chains are flat lists, so only parentheses and `not` nest.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Not(Box<Expr>),
    Match(MatchExpr),
}

/// One `<Selector> <op> <Value>` test; the `not`/`!=` forms set `negate`.
#[derive(Clone, Debug, PartialEq)]
struct MatchExpr {
    selector: Vec<String>,
    test: Test,
    negate: bool,
}

#[derive(Clone, Debug, PartialEq)]
enum Test {
    /// `==` (and `!=` negated).
    Equal(String),
    /// `in` / `contains` (and their `not` forms negated).
    Contains(String),
    /// `is empty` (and `is not empty` negated).
    IsEmpty,
    /// `matches` (and `not matches` negated).
    Matches(Pattern),
}

impl Expr {
    fn eval(&self, doc: &Value) -> bool {
        match self {
            Expr::Or(items) => items.iter().any(|e| e.eval(doc)),
            Expr::And(items) => items.iter().all(|e| e.eval(doc)),
            Expr::Not(inner) => !inner.eval(doc),
            Expr::Match(m) => m.eval(doc),
        }
    }
}

/// What a selector picks out of a document.
enum Selection<'a> {
    /// A key on the path is absent, or the path runs into a scalar.
    Missing,
    /// The path ended on one value (which may itself be an array or object).
    One(&'a Value),
    /// The path crossed an array and was mapped over its elements; one entry per element that
    /// had the rest of the path (`Checks.Status` → every check's status).
    Many(Vec<&'a Value>),
}

impl MatchExpr {
    fn eval(&self, doc: &Value) -> bool {
        let selection = select(doc, &self.selector);
        let result = match &self.test {
            Test::Equal(lit) => equals_selection(&selection, lit),
            Test::Contains(lit) => contains_selection(&selection, lit),
            Test::IsEmpty => empty_selection(&selection),
            Test::Matches(pattern) => matches_selection(&selection, pattern),
        };
        result != self.negate
    }
}

/// Walks `path` from `doc`. Object keys are looked up exactly (case-sensitive). An all-digit
/// segment applied to an array indexes it; any other segment reaching an array maps over the
/// elements, which turns the selection into [`Selection::Many`].
fn select<'a>(doc: &'a Value, path: &[String]) -> Selection<'a> {
    let mut out = Vec::new();
    let mut mapped = false;
    walk(doc, path, &mut out, &mut mapped);
    match (mapped, out.len()) {
        (true, _) => Selection::Many(out),
        (false, 0) => Selection::Missing,
        (false, _) => Selection::One(out[0]),
    }
}

fn walk<'a>(value: &'a Value, path: &[String], out: &mut Vec<&'a Value>, mapped: &mut bool) {
    let Some((segment, rest)) = path.split_first() else {
        out.push(value);
        return;
    };
    match value {
        Value::Object(map) => {
            if let Some(child) = map.get(segment.as_str()) {
                walk(child, rest, out, mapped);
            }
        }
        Value::Array(items) => {
            if let Ok(index) = segment.parse::<usize>() {
                if let Some(child) = items.get(index) {
                    walk(child, rest, out, mapped);
                }
            } else {
                *mapped = true;
                for item in items {
                    walk(item, path, out, mapped);
                }
            }
        }
        _ => {}
    }
}

/// `==`: a single scalar equals the literal by [`scalar_equals`]; a mapped list passes when ANY
/// element does (so `Checks.Status == critical` means "some check is critical", and `!=`, its
/// negation, means "no check is critical"). A missing value, an array or an object selected
/// directly never equals a literal.
fn equals_selection(selection: &Selection, lit: &str) -> bool {
    match selection {
        Selection::Missing => false,
        Selection::One(v) => scalar_equals(v, lit),
        Selection::Many(vs) => vs.iter().any(|v| scalar_equals(v, lit)),
    }
}

/// Strings compare as strings; numbers and booleans by their text form (`Port == 8080` and
/// `Port == "8080"` both match JSON `8080`), and numbers also numerically (`1.0` matches `1`).
fn scalar_equals(value: &Value, lit: &str) -> bool {
    match value {
        Value::String(s) => s == lit,
        Value::Bool(b) => lit == if *b { "true" } else { "false" },
        Value::Number(n) => {
            if n.to_string() == lit {
                return true;
            }
            if let (Some(a), Ok(b)) = (n.as_i64(), lit.parse::<i64>()) {
                return a == b;
            }
            if let (Some(a), Ok(b)) = (n.as_u64(), lit.parse::<u64>()) {
                return a == b;
            }
            match (n.as_f64(), lit.parse::<f64>()) {
                (Some(a), Ok(b)) => a == b,
                _ => false,
            }
        }
        _ => false,
    }
}

/// `in`/`contains`: an array holds an element equal to the literal; an object has the literal as
/// a key; a string has it as a substring. On a mapped list, any element that is an array or
/// object is searched as above and any scalar element is compared for equality.
fn contains_selection(selection: &Selection, lit: &str) -> bool {
    match selection {
        Selection::Missing => false,
        Selection::One(v) => contains_value(v, lit),
        Selection::Many(vs) => vs.iter().any(|v| match v {
            Value::Array(_) | Value::Object(_) => contains_value(v, lit),
            _ => scalar_equals(v, lit),
        }),
    }
}

fn contains_value(value: &Value, lit: &str) -> bool {
    match value {
        Value::Array(items) => items.iter().any(|v| scalar_equals(v, lit)),
        Value::Object(map) => map.contains_key(lit),
        Value::String(s) => s.contains(lit),
        _ => false,
    }
}

/// `is empty`: missing, null, `""`, `[]` and `{}` are empty. A mapped list is empty when every
/// element is (vacuously so when no element had the path), so `is not empty` means "some is not".
fn empty_selection(selection: &Selection) -> bool {
    match selection {
        Selection::Missing => true,
        Selection::One(v) => empty_value(v),
        Selection::Many(vs) => vs.iter().all(|v| empty_value(v)),
    }
}

fn empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `matches`: a scalar's text form is searched (unanchored, as Go's `regexp.MatchString`); a mapped
/// list passes when any element matches. Missing values, arrays and objects never match, so
/// `not matches` passes for them.
fn matches_selection(selection: &Selection, pattern: &Pattern) -> bool {
    let one = |v: &Value| scalar_text(v).is_some_and(|text| pattern.is_match(&text));
    match selection {
        Selection::Missing => false,
        Selection::One(v) => one(v),
        Selection::Many(vs) => vs.iter().any(|v| one(v)),
    }
}

fn scalar_text(value: &Value) -> Option<Cow<'_, str>> {
    match value {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn health_entry() -> Value {
        json!({
            "Node": {"Node": "n1", "Address": "10.0.0.1", "Meta": {}},
            "Service": {
                "ID": "web-12",
                "Service": "web",
                "Tags": ["v1", "primary", "env=prod"],
                "Meta": {"version": "1.0", "some-key": "x", "empty": ""},
                "Port": 8080,
                "Address": "10.0.0.1",
                "Weights": {"Passing": 1, "Warning": 1},
                "EnableTagOverride": false
            },
            "Checks": [
                {"CheckID": "serfHealth", "Status": "passing", "Output": ""},
                {"CheckID": "service:web-12", "Status": "critical", "Output": "timeout"}
            ]
        })
    }

    fn catalog_entry() -> Value {
        json!({
            "Node": "n1",
            "Address": "10.0.0.1",
            "Datacenter": "dc1",
            "ServiceID": "web-12",
            "ServiceName": "web",
            "ServiceTags": ["v1", "x"],
            "ServicePort": 8080,
            "ServiceMeta": {"k-1": "v", "version": "2.1"},
            "ServiceWeights": {"Passing": 1, "Warning": 1}
        })
    }

    /// Parses `expr` (panicking with the message on error) and evaluates it on `doc`.
    fn eval(expr: &str, doc: &Value) -> bool {
        Filter::parse(expr)
            .unwrap_or_else(|e| panic!("{expr:?} failed to parse: {e}"))
            .matches(doc)
    }

    fn err(expr: &str) -> String {
        match Filter::parse(expr) {
            Ok(f) => panic!("{expr:?} parsed as {f:?}"),
            Err(e) => e,
        }
    }

    fn re(pattern: &str, text: &str) -> bool {
        Pattern::new(pattern)
            .unwrap_or_else(|e| panic!("{pattern:?}: {e}"))
            .is_match(text)
    }

    #[test]
    fn consul_documented_examples() {
        let h = health_entry();
        let c = catalog_entry();
        assert!(eval(r#"Service.Meta.version == "1.0""#, &h));
        assert!(eval(r#""v1" in Service.Tags"#, &h));
        assert!(eval(
            "Checks.Status != passing",
            &json!({"Checks": [{"Status": "critical"}]})
        ));
        assert!(!eval("Checks.Status != passing", &h));
        assert!(eval(r#"Service.Port == 8080 and Node.Node == "n1""#, &h));
        assert!(eval(r#"not (ServiceTags contains "y")"#, &c));
        assert!(!eval(r#"not (ServiceTags contains "x")"#, &c));
        assert!(eval(r#"ServiceMeta["k-1"] == v"#, &c));
        assert!(eval(r#"Service.ID matches "^web-[0-9]+$""#, &h));
        assert!(!eval(r#"Service.ID matches "^api-[0-9]+$""#, &h));
    }

    #[test]
    fn equality_of_strings_numbers_and_booleans() {
        let h = health_entry();
        assert!(eval("Service.Service == web", &h));
        assert!(!eval("Service.Service == api", &h));
        assert!(eval("Service.Service != api", &h));
        assert!(!eval("Service.Service != web", &h));
        assert!(eval(r#"Service.Port == "8080""#, &h));
        assert!(eval("Service.Port == 8080.0", &h));
        assert!(!eval("Service.Port == 8081", &h));
        assert!(eval("Service.EnableTagOverride == false", &h));
        assert!(!eval("Service.EnableTagOverride == true", &h));
        assert!(eval("Service.Meta.version == 1.0", &h));
        assert!(eval("X == -3", &json!({"X": -3})));
        assert!(eval("X == 2.5", &json!({"X": 2.5})));
        // A value that is not a scalar never equals a literal.
        assert!(!eval("Service.Tags == v1", &h));
        assert!(!eval("Service.Meta == x", &h));
        assert!(!eval("X == null", &json!({"X": null})));
    }

    #[test]
    fn missing_selectors() {
        let h = health_entry();
        assert!(!eval("Service.Nope == x", &h));
        assert!(eval("Service.Nope != x", &h));
        assert!(!eval("Service.Port.Deeper == x", &h));
        assert!(!eval(r#""x" in Service.Nope"#, &h));
        assert!(eval(r#""x" not in Service.Nope"#, &h));
        assert!(eval("Service.Nope is empty", &h));
        assert!(!eval("Service.Nope matches x", &h));
        assert!(eval("Service.Nope not matches x", &h));
    }

    #[test]
    fn selectors_are_case_sensitive() {
        assert!(!eval("service.service == web", &health_entry()));
    }

    #[test]
    fn arrays_map_over_elements() {
        let h = health_entry();
        assert!(eval("Checks.Status == passing", &h));
        assert!(eval("Checks.Status == critical", &h));
        assert!(!eval("Checks.Status == warning", &h));
        assert!(eval("Checks.Status != warning", &h));
        assert!(eval(r#""critical" in Checks.Status"#, &h));
        assert!(eval(r#""warning" not in Checks.Status"#, &h));
        assert!(eval("Checks.CheckID matches `^service:`", &h));
        assert!(!eval("Checks.CheckID matches `^node:`", &h));
        // Some output is not empty; not all are.
        assert!(eval("Checks.Output is not empty", &h));
        assert!(!eval("Checks.Output is empty", &h));
        assert!(eval("Checks.Nope is empty", &h));
        assert!(eval("Checks.Status is empty", &json!({"Checks": []})));
        // Numeric segments index arrays.
        assert!(eval("Checks.1.Status == critical", &h));
        assert!(!eval("Checks.1.Status == passing", &h));
        assert!(eval("Service.Tags.0 == v1", &h));
        assert!(!eval("Service.Tags.9 == v1", &h));
        // Elements that are arrays are searched by `contains`.
        let nested = json!({"Items": [{"Tags": ["a"]}, {"Tags": ["b"]}]});
        assert!(eval("Items.Tags contains b", &nested));
        assert!(!eval("Items.Tags contains c", &nested));
    }

    #[test]
    fn in_and_contains() {
        let h = health_entry();
        assert!(eval("v1 in Service.Tags", &h));
        assert!(eval(r#""env=prod" in Service.Tags"#, &h));
        assert!(!eval("v2 in Service.Tags", &h));
        assert!(eval("v2 not in Service.Tags", &h));
        assert!(!eval("v1 not in Service.Tags", &h));
        assert!(eval("Service.Tags contains primary", &h));
        assert!(!eval("Service.Tags contains second", &h));
        assert!(eval("Service.Tags not contains second", &h));
        // Maps: key presence.
        assert!(eval(r#""some-key" in Service.Meta"#, &h));
        assert!(eval("Service.Meta contains version", &h));
        assert!(!eval("Service.Meta contains x", &h));
        assert!(eval("Service.Meta not contains x", &h));
        // Strings: substring.
        assert!(eval("Service.ID contains web", &h));
        assert!(eval(r#""b-1" in Service.ID"#, &h));
        assert!(!eval("Service.ID contains api", &h));
        // Numbers in arrays compare by text.
        assert!(eval("3 in Ports", &json!({"Ports": [1, 3]})));
        assert!(!eval("Service.Port contains 80", &h));
    }

    #[test]
    fn is_empty_and_is_not_empty() {
        let doc = json!({"N": null, "S": "", "A": [], "O": {}, "F": "x", "L": [1], "M": {"a": 1},
                         "Z": 0, "B": false});
        for sel in ["N", "S", "A", "O", "Missing"] {
            assert!(eval(&format!("{sel} is empty"), &doc), "{sel}");
            assert!(!eval(&format!("{sel} is not empty"), &doc), "{sel}");
        }
        for sel in ["F", "L", "M", "Z", "B"] {
            assert!(!eval(&format!("{sel} is empty"), &doc), "{sel}");
            assert!(eval(&format!("{sel} is not empty"), &doc), "{sel}");
        }
        assert!(eval(r#"Service.Meta["empty"] is empty"#, &health_entry()));
    }

    #[test]
    fn matches_and_not_matches() {
        let h = health_entry();
        assert!(eval("Service.ID matches `web-\\d+`", &h));
        assert!(eval(r#"Service.ID matches "web-\\d+""#, &h));
        assert!(eval("Service.ID matches eb", &h));
        assert!(!eval("Service.ID not matches eb", &h));
        assert!(eval("Service.ID not matches `^api`", &h));
        assert!(eval("Service.Port matches `^80[0-9]0$`", &h));
        assert!(eval("Service.EnableTagOverride matches `^f`", &h));
        assert!(!eval("Service.Tags matches v1", &h));
    }

    #[test]
    fn bracket_selectors() {
        let h = health_entry();
        assert!(eval(r#"Service.Meta["some-key"] == x"#, &h));
        assert!(eval("Service.Meta[`some-key`] == x", &h));
        assert!(eval(r#"Service.Meta[ "version" ] == "1.0""#, &h));
        assert!(eval(r#"Service["Meta"].version == "1.0""#, &h));
        assert!(eval(r#"x in Service.Meta["some-key"]"#, &h));
        assert!(err("Service.Meta.some-key == x").contains("unexpected '-'"));
        assert!(err(r#"Service.Meta["some-key" == x"#).contains("expected ']'"));
        assert!(err("Service.Meta[some] == x").contains("quoted key"));
        assert!(err(r#"Service.Meta["a"] in Service.Tags"#).contains("value before 'in'"));
    }

    #[test]
    fn string_literals() {
        let doc = json!({"S": "a \"q\" \\ b", "R": "x\\d"});
        assert!(eval(r#"S == "a \"q\" \\ b""#, &doc));
        assert!(eval(r"R == `x\d`", &doc));
        assert!(eval(r#"R == "x\\d""#, &doc));
        assert!(eval(r#"T == "tab\there""#, &json!({"T": "tab\there"})));
        assert!(eval("U == \"ünï\"", &json!({"U": "ünï"})));
        assert!(err(r#"R == "x\d""#).contains("unsupported escape '\\d'"));
        assert!(err(r#"S == "open"#).contains("unterminated string starting at 6"));
        assert!(err("S == `open").contains("unterminated string"));
    }

    #[test]
    fn precedence_and_grouping() {
        let doc = json!({"A": 1, "B": 0, "C": 0});
        // not > and > or: `A or B and C` is `A or (B and C)`.
        assert!(eval("A == 1 or B == 1 and C == 1", &doc));
        assert!(!eval("(A == 1 or B == 1) and C == 1", &doc));
        // `not A and B` is `(not A) and B`.
        assert!(!eval("not A == 1 and B == 0", &doc));
        assert!(eval("not (A == 1 and B == 1)", &doc));
        assert!(eval("not not A == 1", &doc));
        assert!(!eval("not not not A == 1", &doc));
        assert!(eval("B == 1 or C == 1 or A == 1", &doc));
        assert!(!eval("A == 1 and B == 0 and C == 1", &doc));
        assert!(eval("((A == 1))", &doc));
        assert!(eval("\t( A == 1 )\n", &doc));
        assert!(eval("A==1 and(B==0)", &doc));
        // Keywords are lowercase and must be whole words.
        assert!(err("A == 1 AND B == 0").contains("unexpected 'A' at 8"));
        assert!(eval("order == 1 or android == 1", &json!({"android": 1})));
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(err(""), "empty filter expression");
        assert_eq!(err("   "), "empty filter expression");
        assert!(err("(A == 1").contains("expected ')' to close the '(' at 1"));
        assert!(err("A == 1)").starts_with("unexpected ')' at 7"));
        assert!(err("()").starts_with("unexpected ')' at 2"));
        assert_eq!(err("A equals 1"), "unknown operator 'equals' at 3");
        assert!(err("A == 1 B == 2").starts_with("unexpected 'B' at 8"));
        assert!(err("A == 1 and").contains("expected a match expression at 11"));
        assert!(err("A").contains("expected an operator"));
        assert!(err("A ==").contains("expected a value at 5"));
        assert!(err("A is full").contains("'empty' or 'not empty'"));
        assert!(err("A not equals b").contains("after 'not'"));
        assert!(err(r#""x" == A"#).contains("expected 'in' or 'not in'"));
        assert!(err("x in 3").contains("expected a selector at 6"));
        assert!(err("A == 1.2.3").contains("invalid number at 6"));
        assert!(err("A == 12ab").contains("invalid number"));
        assert!(err("A. == 1").contains("expected a name after '.'"));
        assert!(err("A == 1 & B == 2").contains("unexpected '&'"));
        assert!(err("A matches `(?i)x`").contains("bad pattern for 'matches' at 11"));
        assert!(err("A matches `\\p{L}`").contains("unsupported escape '\\p'"));
        assert!(err("A == ü").contains("unexpected 'ü' at 6"));
    }

    #[test]
    fn length_and_depth_are_capped() {
        let long = format!("A == \"{}\"", "x".repeat(MAX_EXPR_BYTES));
        assert!(err(&long).contains("limit is 4096"));
        let ok = format!("A == \"{}\"", "x".repeat(MAX_EXPR_BYTES - 7));
        assert_eq!(ok.len(), MAX_EXPR_BYTES);
        assert!(Filter::parse(&ok).is_ok());

        let nest = |n: usize| format!("{}A == 1{}", "(".repeat(n), ")".repeat(n));
        assert!(eval(&nest(MAX_DEPTH), &json!({"A": 1})));
        assert!(err(&nest(MAX_DEPTH + 1)).contains("deeper than 32"));
        assert!(err(&nest(2000)).contains("deeper than 32"));
        let nots = |n: usize| format!("{}A == 1", "not ".repeat(n));
        assert!(eval(&nots(MAX_DEPTH), &json!({"A": 1})));
        assert!(err(&nots(MAX_DEPTH + 1)).contains("deeper than 32"));
        // Long flat chains are fine: they do not nest.
        let chain = vec!["A == 1"; 200].join(" or ");
        assert!(eval(&chain, &json!({"A": 1})));
    }

    #[test]
    fn parsed_filters_compare_and_clone() {
        let a = Filter::parse("A == 1 and B matches `x+`").unwrap();
        assert_eq!(a.clone(), a);
        assert_ne!(a, Filter::parse("A == 2 and B matches `x+`").unwrap());
    }

    #[test]
    fn regex_basics() {
        assert!(re("abc", "xxabcxx"));
        assert!(!re("abd", "xxabcxx"));
        assert!(re("", "anything"));
        assert!(re("^$", ""));
        assert!(!re("^$", "a"));
        assert!(re("a.c", "abc"));
        assert!(!re("a.c", "a\nc"));
        assert!(re("^ab*c$", "ac"));
        assert!(re("^ab*c$", "abbbc"));
        assert!(!re("^ab+c$", "ac"));
        assert!(re("^ab?c$", "abc"));
        assert!(!re("^ab?c$", "abbc"));
        assert!(re("^(ab)+$", "ababab"));
        assert!(!re("^(ab)+$", "ababa"));
        assert!(re("^(?:cat|dog)s?$", "dogs"));
        assert!(!re("^(cat|dog)$", "cow"));
        assert!(re("^a|b$", "axx"));
        assert!(re("^a|b$", "xxb"));
        assert!(re(r"^v\d+\.\d+$", "v1.20"));
        assert!(!re(r"^v\d+\.\d+$", "v1x20"));
        assert!(re(r"^\w+$", "Ab_9"));
        assert!(!re(r"^\w+$", "a-b"));
        assert!(re(r"\s", "a b"));
        assert!(re(r"^\S+$", "ab"));
        assert!(re(r"^\D+$", "ab"));
        assert!(!re(r"^\D+$", "a1"));
        assert!(re(r"\bweb\b", "a web b"));
        assert!(!re(r"\bweb\b", "webs"));
        assert!(re(r"web\B", "webs"));
        assert!(re(r"\Aab\z", "ab"));
        assert!(re("^ü.$", "üx"));
        assert!(re("a{2}", "caab"));
        assert!(!re("^a{2}$", "aaa"));
        assert!(re("^a{2,}$", "aaaa"));
        assert!(re("^a{1,3}$", "aaa"));
        assert!(!re("^a{1,3}$", "aaaa"));
        assert!(
            re("^a{,3}$", "a{,3}"),
            "a malformed count is literal, as in Go"
        );
        assert!(re("^x{$", "x{"));
        assert!(re("^a*?b$", "aab"));
        assert!(re("^a+?$", "aaa"));
        assert!(re("^(a*)*$", "aaa"));
        assert!(re("^(a|b*)*c$", "abbac"));
    }

    #[test]
    fn regex_classes() {
        assert!(re("^[a-z0-9_-]+$", "web-1_a"));
        assert!(!re("^[a-z0-9_-]+$", "Web"));
        assert!(re("^[^0-9]+$", "abc"));
        assert!(!re("^[^0-9]+$", "a1c"));
        assert!(re("^[]a]+$", "]a]"));
        assert!(re(r"^[\d.]+$", "1.2.3"));
        assert!(re(r"^[\D]$", "x"));
        assert!(re(r"^[\]\\]+$", "]\\"));
        assert!(re("^[-a]+$", "-a"));
        assert!(re("^[a-]+$", "a-"));
        assert!(re("^[.]$", "."));
        assert!(!re("^[.]$", "x"));
    }

    #[test]
    fn regex_rejects_what_it_does_not_serve() {
        for (pattern, message) in [
            ("(?i)web", "unsupported group syntax"),
            ("(?P<n>a)", "unsupported group syntax"),
            (r"\p{L}", "unsupported escape '\\p'"),
            (r"\1", "unsupported escape '\\1'"),
            (r"\Qa\E", "unsupported escape '\\Q'"),
            ("[[:alpha:]]", "POSIX"),
            ("*a", "missing argument"),
            ("a**", "nested repetition"),
            ("a+*", "nested repetition"),
            ("(ab", "missing ')'"),
            ("ab)", "unexpected ')'"),
            ("[ab", "missing ']'"),
            ("[z-a]", "invalid character class range"),
            (r"[\b]", "assertion escape"),
            ("a{1001}", "invalid repeat count"),
            ("a{3,2}", "invalid repeat count"),
            ("(((a{1000}){1000}){1000})", "pattern too large"),
            ("a\\", "trailing backslash"),
        ] {
            let e = Pattern::new(pattern).expect_err(pattern);
            assert!(e.contains(message), "{pattern}: {e}");
        }
        let deep = format!("{}a{}", "(".repeat(40), ")".repeat(40));
        assert!(Pattern::new(&deep).unwrap_err().contains("deeper than"));
    }

    #[test]
    fn regex_step_budget_bounds_hostile_patterns() {
        // Classic catastrophic backtracking patterns finish quickly and correctly,
        // because explored (instruction, position) pairs are never revisited.
        let text = format!("{}!", "a".repeat(5000));
        let start = std::time::Instant::now();
        assert!(!re("^(a+)+$", &text));
        assert!(!re("(a|a)*b", &text));
        assert!(!re("(a*)*(a*)*(a*)*c", &text));
        assert!(start.elapsed() < std::time::Duration::from_secs(2));

        // The budget itself: a search that needs more steps than allowed reports no match.
        let long = format!("{}b", "a".repeat(200_000));
        let pattern = Pattern::new("b").unwrap();
        assert!(!pattern.is_match(&long), "over budget means no match");
        assert!(pattern.is_match_within(&long, usize::MAX));
        let pattern = Pattern::new("^(a|aa)*b$").unwrap();
        let short = format!("{}b", "a".repeat(30));
        assert!(pattern.is_match_within(&short, STEP_BUDGET));
        assert!(!pattern.is_match_within(&short, 10));

        // Through the public API: a hostile filter on a big value ends and fails closed.
        let filter = Filter::parse("S matches `(x+x+)+y`").unwrap();
        let doc = json!({ "S": "x".repeat(100_000) });
        let start = std::time::Instant::now();
        assert!(!filter.matches(&doc));
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }
}
