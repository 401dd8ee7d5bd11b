//! The filter language's recursive-descent parser: an expression's text into [`Expr`].

use super::*;

/// Recursive-descent parser over the expression's bytes. Everything it steps over byte by byte
/// is ASCII; string literals are stepped over by `char`, so `pos` is always a char boundary.
pub(super) struct Parser<'a> {
    pub(super) src: &'a str,
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    /// Current nesting of parentheses and `not`, capped at [`MAX_DEPTH`].
    pub(super) depth: usize,
}

pub(super) fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Parser<'_> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, offset: usize) -> Option<u8> {
        self.bytes.get(self.pos + offset).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.pos += 1;
        }
    }

    /// 1-based character column of byte offset `pos`, for messages.
    pub(super) fn col(&self, pos: usize) -> usize {
        self.src[..pos].chars().count() + 1
    }

    pub(super) fn unexpected(&self, pos: usize) -> String {
        match self.src[pos..].chars().next() {
            Some(c) => format!("unexpected '{c}' at {}", self.col(pos)),
            None => format!("unexpected end of filter at {}", self.col(pos)),
        }
    }

    /// The word (letter, then letters/digits/`_`) starting at `pos`, without consuming it.
    pub(super) fn peek_word(&self) -> Option<&str> {
        if !self.peek()?.is_ascii_alphabetic() {
            return None;
        }
        let end = self.bytes[self.pos..]
            .iter()
            .position(|&b| !is_ident_byte(b))
            .map_or(self.bytes.len(), |n| self.pos + n);
        Some(&self.src[self.pos..end])
    }

    /// Consumes keyword `kw` (after whitespace) if it is the next whole word.
    pub(super) fn eat_keyword(&mut self, kw: &str) -> bool {
        self.skip_ws();
        if self.peek_word() == Some(kw) {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    pub(super) fn enter(&mut self, at: usize) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "filter nests deeper than {MAX_DEPTH} levels at {}",
                self.col(at)
            ));
        }
        Ok(())
    }

    pub(super) fn parse_or(&mut self) -> Result<Expr, String> {
        let mut items = vec![self.parse_and()?];
        while self.eat_keyword("or") {
            items.push(self.parse_and()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Or(items)
        })
    }

    pub(super) fn parse_and(&mut self) -> Result<Expr, String> {
        let mut items = vec![self.parse_not()?];
        while self.eat_keyword("and") {
            items.push(self.parse_not()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::And(items)
        })
    }

    pub(super) fn parse_not(&mut self) -> Result<Expr, String> {
        self.skip_ws();
        let at = self.pos;
        if self.eat_keyword("not") {
            self.enter(at)?;
            let inner = self.parse_not()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.parse_primary()
    }

    pub(super) fn parse_primary(&mut self) -> Result<Expr, String> {
        self.skip_ws();
        if self.peek() != Some(b'(') {
            return self.parse_match().map(Expr::Match);
        }
        let open = self.pos;
        self.enter(open)?;
        self.pos += 1;
        let inner = self.parse_or()?;
        self.skip_ws();
        if self.peek() != Some(b')') {
            return Err(format!(
                "{}; expected ')' to close the '(' at {}",
                self.unexpected(self.pos),
                self.col(open)
            ));
        }
        self.pos += 1;
        self.depth -= 1;
        Ok(inner)
    }

    pub(super) fn parse_match(&mut self) -> Result<MatchExpr, String> {
        self.skip_ws();
        let start = self.pos;
        match self.peek() {
            None => Err(format!(
                "expected a match expression at {}",
                self.col(start)
            )),
            Some(b'"' | b'`') => {
                let value = self.parse_string()?;
                self.parse_in_selector(value)
            }
            Some(b) if b.is_ascii_digit() || b == b'-' => {
                let value = self.parse_number()?;
                self.parse_in_selector(value)
            }
            Some(b) if b.is_ascii_alphabetic() => {
                let (selector, bare) = self.parse_selector()?;
                let end = self.pos;
                self.parse_operator(selector, bare, start, end)
            }
            Some(_) => Err(self.unexpected(start)),
        }
    }

    /// After a leading value: `in <Selector>` or `not in <Selector>`.
    pub(super) fn parse_in_selector(&mut self, value: String) -> Result<MatchExpr, String> {
        self.skip_ws();
        let at = self.pos;
        let negate = if self.eat_keyword("in") {
            false
        } else if self.eat_keyword("not") && self.eat_keyword("in") {
            true
        } else {
            return Err(format!(
                "expected 'in' or 'not in' after a value at {}",
                self.col(at)
            ));
        };
        let selector = self.parse_selector_after_ws()?;
        Ok(MatchExpr {
            selector,
            test: Test::Contains(value),
            negate,
        })
    }

    /// After a leading selector (`start..end` is its text, `bare` when it has no brackets).
    pub(super) fn parse_operator(
        &mut self,
        selector: Vec<String>,
        bare: bool,
        start: usize,
        end: usize,
    ) -> Result<MatchExpr, String> {
        self.skip_ws();
        let at = self.pos;
        let mk = |test, negate| MatchExpr {
            selector: selector.clone(),
            test,
            negate,
        };
        if self.bytes[at..].starts_with(b"==") || self.bytes[at..].starts_with(b"!=") {
            let negate = self.bytes[at] == b'!';
            self.pos += 2;
            let value = self.parse_value()?;
            return Ok(mk(Test::Equal(value), negate));
        }
        let Some(word) = self.peek_word() else {
            return Err(match self.peek() {
                None => format!(
                    "expected an operator after the selector at {}",
                    self.col(at)
                ),
                Some(_) => self.unexpected(at),
            });
        };
        let word = word.to_string();
        self.pos += word.len();
        let negate = word == "not";
        let op = if negate {
            self.skip_ws();
            let op_at = self.pos;
            match self.peek_word() {
                Some(w @ ("in" | "contains" | "matches")) => {
                    let w = w.to_string();
                    self.pos += w.len();
                    w
                }
                _ => {
                    return Err(format!(
                        "expected 'in', 'contains' or 'matches' after 'not' at {}",
                        self.col(op_at)
                    ))
                }
            }
        } else {
            word
        };
        match op.as_str() {
            "in" => {
                // `word in Selector`: what we read as a selector was a bare-word value.
                if !bare {
                    return Err(format!(
                        "the value before 'in' at {} must be a string, number or bare word",
                        self.col(start)
                    ));
                }
                let value = self.src[start..end].to_string();
                let selector = self.parse_selector_after_ws()?;
                Ok(MatchExpr {
                    selector,
                    test: Test::Contains(value),
                    negate,
                })
            }
            "contains" => {
                let value = self.parse_value()?;
                Ok(mk(Test::Contains(value), negate))
            }
            "matches" => {
                self.skip_ws();
                let value_at = self.pos;
                let value = self.parse_value()?;
                let pattern = Pattern::new(&value).map_err(|e| {
                    format!("bad pattern for 'matches' at {}: {e}", self.col(value_at))
                })?;
                Ok(mk(Test::Matches(pattern), negate))
            }
            "is" => {
                if self.eat_keyword("empty") {
                    Ok(mk(Test::IsEmpty, false))
                } else if self.eat_keyword("not") && self.eat_keyword("empty") {
                    Ok(mk(Test::IsEmpty, true))
                } else {
                    Err(format!(
                        "expected 'empty' or 'not empty' after 'is' at {}",
                        self.col(self.pos)
                    ))
                }
            }
            other => Err(format!("unknown operator '{other}' at {}", self.col(at))),
        }
    }

    pub(super) fn parse_selector_after_ws(&mut self) -> Result<Vec<String>, String> {
        self.skip_ws();
        if !self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            return Err(format!("expected a selector at {}", self.col(self.pos)));
        }
        Ok(self.parse_selector()?.0)
    }

    /// `Name(.Name | .digits | ["key"])*`, no whitespace except inside brackets. Returns the
    /// path and whether it is bare (no brackets), i.e. usable as a bare-word value.
    pub(super) fn parse_selector(&mut self) -> Result<(Vec<String>, bool), String> {
        let mut path = vec![self.take_ident()];
        let mut bare = true;
        loop {
            match self.peek() {
                Some(b'.') => {
                    if !self.peek_at(1).is_some_and(is_ident_byte) {
                        return Err(format!(
                            "expected a name after '.' at {}",
                            self.col(self.pos + 1)
                        ));
                    }
                    self.pos += 1;
                    path.push(self.take_ident());
                }
                Some(b'[') => {
                    self.pos += 1;
                    self.skip_ws();
                    if !matches!(self.peek(), Some(b'"' | b'`')) {
                        return Err(format!(
                            "expected a quoted key after '[' at {}",
                            self.col(self.pos)
                        ));
                    }
                    path.push(self.parse_string()?);
                    self.skip_ws();
                    if self.peek() != Some(b']') {
                        return Err(format!("expected ']' at {}", self.col(self.pos)));
                    }
                    self.pos += 1;
                    bare = false;
                }
                _ => return Ok((path, bare)),
            }
        }
    }

    pub(super) fn take_ident(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(is_ident_byte) {
            self.pos += 1;
        }
        self.src[start..self.pos].to_string()
    }

    /// A right-hand value: quoted string, number, or bare word (dotted names allowed).
    pub(super) fn parse_value(&mut self) -> Result<String, String> {
        self.skip_ws();
        match self.peek() {
            Some(b'"' | b'`') => self.parse_string(),
            Some(b) if b.is_ascii_digit() || b == b'-' => self.parse_number(),
            Some(b) if b.is_ascii_alphabetic() => {
                let start = self.pos;
                let (_, bare) = self.parse_selector()?;
                if !bare {
                    return Err(format!(
                        "expected a value at {}, found a selector with brackets",
                        self.col(start)
                    ));
                }
                Ok(self.src[start..self.pos].to_string())
            }
            None => Err(format!("expected a value at {}", self.col(self.pos))),
            Some(_) => Err(self.unexpected(self.pos)),
        }
    }

    /// `-?digits(.digits)?`, which must end at whitespace, `)` or the end of the filter.
    pub(super) fn parse_number(&mut self) -> Result<String, String> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                p.pos += 1;
            }
            p.pos > from
        };
        let mut ok = digits(self);
        if ok && self.peek() == Some(b'.') {
            self.pos += 1;
            ok = digits(self);
        }
        if !ok
            || !matches!(
                self.peek(),
                None | Some(b' ' | b'\t' | b'\r' | b'\n' | b')')
            )
        {
            return Err(format!("invalid number at {}", self.col(start)));
        }
        Ok(self.src[start..self.pos].to_string())
    }

    /// A `"..."` string (escapes `\"`, `\\`, `\n`, `\t`, `\r`) or a `` `...` `` raw string.
    pub(super) fn parse_string(&mut self) -> Result<String, String> {
        let start = self.pos;
        let quote = self.src[start..].chars().next().unwrap_or('"');
        let mut out = String::new();
        let mut chars = self.src[start + 1..].char_indices();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                self.pos = start + 1 + i + 1;
                return Ok(out);
            }
            if c == '\\' && quote == '"' {
                let escaped = match chars.next() {
                    Some((_, '"')) => '"',
                    Some((_, '\\')) => '\\',
                    Some((_, 'n')) => '\n',
                    Some((_, 't')) => '\t',
                    Some((_, 'r')) => '\r',
                    Some((_, other)) => {
                        return Err(format!(
                            "unsupported escape '\\{other}' in the string at {} (write '\\\\' for a backslash, or use a `raw string`)",
                            self.col(start)
                        ))
                    }
                    None => break,
                };
                out.push(escaped);
            } else {
                out.push(c);
            }
        }
        Err(format!(
            "unterminated string starting at {}",
            self.col(start)
        ))
    }
}
