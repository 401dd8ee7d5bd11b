//! Metadata selectors in label-selector syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
//! `k notin (a,b)`, `k` (has the key), `!k` (lacks it); a comma means "and". Absent
//! keys match `!=` and `notin`, as in Kubernetes.

use std::collections::BTreeSet;
use std::fmt;

use super::meta::Lookup;

/// One condition on instance metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `k=v`
    Equals(String, String),
    /// `k!=v`
    NotEquals(String, String),
    /// `k in (a,b)`
    In(String, BTreeSet<String>),
    /// `k notin (a,b)`
    NotIn(String, BTreeSet<String>),
    /// `k`
    Exists(String),
    /// `!k`
    NotExists(String),
}

impl Requirement {
    fn matches(&self, metadata: &impl Lookup) -> bool {
        match self {
            Requirement::Equals(k, v) => metadata.lookup(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => metadata.lookup(k) != Some(v.as_str()),
            Requirement::In(k, set) => metadata.lookup(k).is_some_and(|v| set.contains(v)),
            Requirement::NotIn(k, set) => metadata.lookup(k).is_none_or(|v| !set.contains(v)),
            Requirement::Exists(k) => metadata.lookup(k).is_some(),
            Requirement::NotExists(k) => metadata.lookup(k).is_none(),
        }
    }
}

/// A parsed selector: every requirement must hold. The empty selector matches all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements, in the order written.
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether `metadata` satisfies every requirement.
    pub fn matches(&self, metadata: &impl Lookup) -> bool {
        self.requirements.iter().all(|r| r.matches(metadata))
    }

    /// Parses `input`.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        Parser { input, pos: 0 }.selector()
    }
}

/// Where and why a selector did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorError {
    /// Character position (0-based) where parsing failed.
    pub position: usize,
    /// What was expected or wrong.
    pub problem: String,
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at position {}: {}", self.position, self.problem)
    }
}

struct Parser<'a> {
    input: &'a str,
    /// Byte offset of the next character.
    pos: usize,
}

/// Characters a key or value may hold.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '-' | '_' | '/' | ':' | '@' | '+')
}

impl Parser<'_> {
    fn fail<T>(&self, problem: impl Into<String>) -> Result<T, SelectorError> {
        Err(SelectorError {
            position: self.input[..self.pos].chars().count(),
            problem: problem.into(),
        })
    }

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += self.peek().map(char::len_utf8).unwrap_or(0);
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.input[self.pos..].starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn word(&mut self, what: &str) -> Result<String, SelectorError> {
        self.skip_spaces();
        let start = self.pos;
        while self.peek().is_some_and(is_word_char) {
            self.pos += self.peek().map(char::len_utf8).unwrap_or(0);
        }
        if self.pos == start {
            return match self.peek() {
                Some(c) => self.fail(format!("expected {what}, found '{c}'")),
                None => self.fail(format!("expected {what}, found the end")),
            };
        }
        Ok(self.input[start..self.pos].to_string())
    }

    /// `in`/`notin` as a whole word.
    fn keyword(&mut self, kw: &str) -> bool {
        let rest = &self.input[self.pos..];
        if rest.starts_with(kw) && !rest[kw.len()..].chars().next().is_some_and(is_word_char) {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    fn set(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        self.skip_spaces();
        if !self.eat("(") {
            return self.fail("expected '(' to start a set of values");
        }
        let mut values = BTreeSet::new();
        loop {
            values.insert(self.word("a value")?);
            self.skip_spaces();
            if self.eat(")") {
                return Ok(values);
            }
            if !self.eat(",") {
                return self.fail("expected ',' or ')' in a set of values");
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        self.skip_spaces();
        if self.eat("!") {
            return Ok(Requirement::NotExists(self.word("a key after '!'")?));
        }
        let key = self.word("a key")?;
        self.skip_spaces();
        if self.eat("!=") {
            return Ok(Requirement::NotEquals(
                key,
                self.word("a value after '!='")?,
            ));
        }
        if self.eat("==") || self.eat("=") {
            return Ok(Requirement::Equals(key, self.word("a value after '='")?));
        }
        if self.keyword("notin") {
            return Ok(Requirement::NotIn(key, self.set()?));
        }
        if self.keyword("in") {
            return Ok(Requirement::In(key, self.set()?));
        }
        Ok(Requirement::Exists(key))
    }

    fn selector(mut self) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        self.skip_spaces();
        if self.peek().is_none() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement()?);
            self.skip_spaces();
            match self.peek() {
                None => return Ok(LabelSelector { requirements }),
                Some(',') => self.pos += 1,
                Some(c) => return self.fail(format!("expected ',' or the end, found '{c}'")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::Metadata;

    fn meta(pairs: &[(&str, &str)]) -> Metadata {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn semantics() {
        let prod_a = meta(&[("env", "prod"), ("zone", "a")]);
        let dev_b = meta(&[("env", "dev"), ("zone", "b"), ("canary", "true")]);
        let bare = meta(&[]);
        // (selector, prod_a, dev_b, bare)
        let table: &[(&str, bool, bool, bool)] = &[
            ("", true, true, true),
            ("env=prod", true, false, false),
            ("env==prod", true, false, false),
            ("env!=prod", false, true, true),
            ("zone in (a, c)", true, false, false),
            ("zone notin (a,c)", false, true, true),
            ("canary", false, true, false),
            ("!canary", true, false, true),
            ("env=prod,zone in (a,b),!canary", true, false, false),
            ("env in (prod,dev), zone=b", false, true, false),
        ];
        for (sel, a, b, c) in table {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(
                (s.matches(&prod_a), s.matches(&dev_b), s.matches(&bare)),
                (*a, *b, *c),
                "{sel}"
            );
        }
    }

    #[test]
    fn values_may_look_like_versions_and_keys_like_paths() {
        let s = LabelSelector::parse("lane in (v2.0, feature-x_1), app.kubernetes.io/name=shop")
            .unwrap();
        assert!(s.matches(&meta(&[
            ("lane", "v2.0"),
            ("app.kubernetes.io/name", "shop")
        ])));
        // "in" only as a word: a key named "index" is an existence check.
        assert_eq!(
            LabelSelector::parse("index").unwrap().requirements,
            [Requirement::Exists("index".into())]
        );
    }

    #[test]
    fn errors_name_the_position() {
        let table: &[(&str, usize, &str)] = &[
            ("env=", 4, "expected a value after '='"),
            ("env in (a,b", 11, "expected ',' or ')'"),
            ("env in a", 7, "expected '('"),
            ("=prod", 0, "expected a key"),
            ("env=prod zone=a", 9, "expected ',' or the end"),
            ("env=prod,", 9, "expected a key"),
            ("!", 1, "expected a key after '!'"),
        ];
        for (sel, pos, problem) in table {
            let e = LabelSelector::parse(sel).unwrap_err();
            assert_eq!(e.position, *pos, "{sel}: {e}");
            assert!(e.problem.contains(problem), "{sel}: {e}");
        }
    }

    mod fuzz {
        //! The parser on arbitrary text (an answer, never a panic; errors point inside
        //! the input), and a round trip: any selector, written out in the syntax, parses
        //! back to itself.

        use proptest::prelude::*;

        use super::*;

        /// `selector` written in label-selector syntax (the parser has no printer of its
        /// own; this is the syntax the module documents).
        fn write(selector: &LabelSelector) -> String {
            let set = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
            selector
                .requirements
                .iter()
                .map(|r| match r {
                    Requirement::Equals(k, v) => format!("{k}={v}"),
                    Requirement::NotEquals(k, v) => format!("{k} != {v}"),
                    Requirement::In(k, s) => format!("{k} in ({})", set(s)),
                    Requirement::NotIn(k, s) => format!("{k} notin ({})", set(s)),
                    Requirement::Exists(k) => k.clone(),
                    Requirement::NotExists(k) => format!("!{k}"),
                })
                .collect::<Vec<_>>()
                .join(",")
        }

        fn word() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-zA-Z0-9._/:@+-]{1,8}",
                "[\\p{Alphabetic}\\p{Nd}]{1,4}",
                Just("in".to_string()),
                Just("notin".to_string()),
            ]
        }

        fn requirement() -> impl Strategy<Value = Requirement> {
            let set = || proptest::collection::btree_set(word(), 1..4);
            prop_oneof![
                (word(), word()).prop_map(|(k, v)| Requirement::Equals(k, v)),
                (word(), word()).prop_map(|(k, v)| Requirement::NotEquals(k, v)),
                (word(), set()).prop_map(|(k, s)| Requirement::In(k, s)),
                (word(), set()).prop_map(|(k, s)| Requirement::NotIn(k, s)),
                word().prop_map(Requirement::Exists),
                word().prop_map(Requirement::NotExists),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 2_000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            #[test]
            fn arbitrary_text(input in "\\PC{0,60}|[a-z!=(), ]{0,40}") {
                match LabelSelector::parse(&input) {
                    Ok(s) => prop_assert_eq!(LabelSelector::parse(&write(&s)).unwrap(), s),
                    Err(e) => prop_assert!(e.position <= input.chars().count(), "{}", e),
                }
            }

            #[test]
            fn written_selectors_parse_back(requirements in proptest::collection::vec(requirement(), 0..5)) {
                let selector = LabelSelector { requirements };
                let text = write(&selector);
                prop_assert_eq!(LabelSelector::parse(&text).map_err(|e| e.to_string()), Ok(selector), "{}", text);
            }
        }
    }
}
