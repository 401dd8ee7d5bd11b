//! Service filters: `--services 'order-*,payment,!*-canary'`.
//!
//! Comma-separated glob patterns (`*` any run of characters, `?` one character). A
//! name is admitted when it matches some include pattern (or there are none) and no
//! `!`-prefixed exclude pattern.

/// A parsed service filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    include: Vec<String>,
    exclude: Vec<String>,
}

impl Filter {
    /// Every service.
    pub fn all() -> Self {
        Self::default()
    }

    /// Parses a filter; an empty or absent one admits everything.
    pub fn parse(spec: Option<&str>) -> Result<Self, String> {
        let mut f = Self::default();
        for part in spec.unwrap_or("").split(',').map(str::trim) {
            if part.is_empty() {
                continue;
            }
            match part.strip_prefix('!') {
                Some("") => return Err("services: '!' must be followed by a pattern".into()),
                Some(p) => f.exclude.push(p.to_string()),
                None => f.include.push(part.to_string()),
            }
        }
        Ok(f)
    }

    /// Whether the service `name` is imported.
    pub fn admits(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| glob(p, name)))
            && !self.exclude.iter().any(|p| glob(p, name))
    }

    /// The exact names included, if every include pattern is a plain name (lets a
    /// source ask for just those).
    pub fn exact_names(&self) -> Option<Vec<&str>> {
        if self.include.is_empty() || self.include.iter().any(|p| p.contains(['*', '?'])) {
            return None;
        }
        Some(self.include.iter().map(String::as_str).collect())
    }
}

/// Glob match with `*` and `?`, iterative with backtracking to the last `*`.
fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_and_excludes() {
        let f = Filter::parse(Some("order-*, payment ,!*-canary")).unwrap();
        assert!(f.admits("order-service"));
        assert!(f.admits("payment"));
        assert!(!f.admits("order-canary"));
        assert!(!f.admits("inventory"));
        let all = Filter::parse(None).unwrap();
        assert!(all.admits("anything"));
        let ex = Filter::parse(Some("!consumers:*")).unwrap();
        assert!(ex.admits("providers:a::"));
        assert!(!ex.admits("consumers:a::"));
        assert!(Filter::parse(Some("!")).is_err());
        assert_eq!(
            Filter::parse(Some("a,b")).unwrap().exact_names(),
            Some(vec!["a", "b"])
        );
        assert_eq!(Filter::parse(Some("a*")).unwrap().exact_names(), None);
    }

    #[test]
    fn glob_backtracks() {
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(glob("*", ""));
        assert!(!glob("a?c", "ac"));
        assert!(glob("a*c", "abcbc"));
    }
}
