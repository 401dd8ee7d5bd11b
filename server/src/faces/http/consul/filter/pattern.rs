//! The regular expressions `matches` takes: a subset of Go's RE2 syntax, compiled to a small
//! program and run by a bounded backtracking matcher.

use super::*;

/// A compiled regular expression in the subset `matches` serves: literals, `.` (not newline),
/// `[...]`/`[^...]` classes with ranges, `\d \D \w \W \s \S`, escaped punctuation (`\.`),
/// `\n \t \r \f \v`, anchors `^ $ \A \z`, word boundaries `\b \B`, groups `( )` and `(?: )`,
/// alternation `|`, and greedy or lazy `* + ? {n} {n,} {n,m}`. `^`/`$` anchor to the whole text
/// (Go's default, no multi-line mode). Unsupported syntax is an error naming it.
///
/// Matching is a backtracking search over (instruction, position) pairs that never revisits a
/// pair, like RE2's bit-state backtracker, so its cost is at most program length × text length;
/// on top of that a budget of [`STEP_BUDGET`] steps stops it, and an exhausted budget is "no match".
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Pattern {
    pub(super) program: Vec<Inst>,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Node {
    Empty,
    Literal(char),
    Any,
    Class(Class),
    Assert(Assertion),
    Concat(Vec<Node>),
    Alternate(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Assertion {
    Start,
    End,
    WordBoundary,
    NotWordBoundary,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Perl {
    Digit,
    Word,
    Space,
}

impl Perl {
    pub(super) fn has(self, c: char) -> bool {
        match self {
            Perl::Digit => c.is_ascii_digit(),
            Perl::Word => c.is_ascii_alphanumeric() || c == '_',
            Perl::Space => matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' '),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum ClassItem {
    Range(char, char),
    /// `\d`-style shorthand; `true` for the negated (`\D`) form.
    Perl(Perl, bool),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Class {
    pub(super) items: Vec<ClassItem>,
    pub(super) negated: bool,
}

impl Class {
    pub(super) fn perl(kind: Perl, negated: bool) -> Class {
        Class {
            items: vec![ClassItem::Perl(kind, false)],
            negated,
        }
    }

    pub(super) fn has(&self, c: char) -> bool {
        let hit = self.items.iter().any(|item| match *item {
            ClassItem::Range(lo, hi) => lo <= c && c <= hi,
            ClassItem::Perl(kind, neg) => kind.has(c) != neg,
        });
        hit != self.negated
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Inst {
    Literal(char),
    Any,
    Class(Class),
    Assert(Assertion),
    /// Try the first target, backtrack to the second.
    Split(usize, usize),
    Jump(usize),
    Match,
}

/// What an escape outside or inside a class stands for.
pub(super) enum Escape {
    Char(char),
    Class(Perl, bool),
    Assert(Assertion),
}

pub(super) struct PatternParser {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) depth: usize,
}

impl PatternParser {
    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    pub(super) fn parse_alternate(&mut self) -> Result<Node, String> {
        let mut branches = vec![self.parse_concat()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            branches.push(self.parse_concat()?);
        }
        Ok(if branches.len() == 1 {
            branches.remove(0)
        } else {
            Node::Alternate(branches)
        })
    }

    pub(super) fn parse_concat(&mut self) -> Result<Node, String> {
        let mut items = Vec::new();
        while !matches!(self.peek(), None | Some('|' | ')')) {
            items.push(self.parse_repeat()?);
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.remove(0),
            _ => Node::Concat(items),
        })
    }

    pub(super) fn parse_repeat(&mut self) -> Result<Node, String> {
        let atom = self.parse_atom()?;
        let Some((min, max)) = self.parse_quantifier()? else {
            return Ok(atom);
        };
        let greedy = if self.peek() == Some('?') {
            self.pos += 1;
            false
        } else {
            true
        };
        let save = self.pos;
        if self.parse_quantifier()?.is_some() {
            return Err(format!(
                "invalid nested repetition operator '{}'",
                self.chars[save..self.pos].iter().collect::<String>()
            ));
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    /// `*`, `+`, `?` or a well-formed `{n}`, `{n,}`, `{n,m}`; a `{` that is not one stays literal.
    pub(super) fn parse_quantifier(&mut self) -> Result<Option<(u32, Option<u32>)>, String> {
        let q = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => return self.parse_counted(),
            _ => return Ok(None),
        };
        self.pos += 1;
        Ok(Some(q))
    }

    pub(super) fn parse_counted(&mut self) -> Result<Option<(u32, Option<u32>)>, String> {
        let start = self.pos;
        let rest: String = self.chars[start + 1..]
            .iter()
            .take_while(|&&c| c != '}')
            .collect();
        if start + 1 + rest.len() >= self.chars.len() {
            return Ok(None); // no closing '}': a literal '{'
        }
        let number = |s: &str| -> Option<u32> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(s.parse::<u32>().unwrap_or(u32::MAX))
        };
        let (min, max) = match rest.split_once(',') {
            None => match number(&rest) {
                Some(n) => (n, Some(n)),
                None => return Ok(None),
            },
            Some((lo, "")) => match number(lo) {
                Some(n) => (n, None),
                None => return Ok(None),
            },
            Some((lo, hi)) => match (number(lo), number(hi)) {
                (Some(a), Some(b)) => (a, Some(b)),
                _ => return Ok(None),
            },
        };
        if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min) {
            return Err(format!("invalid repeat count '{{{rest}}}'"));
        }
        self.pos = start + 1 + rest.len() + 1;
        Ok(Some((min, max)))
    }

    pub(super) fn parse_atom(&mut self) -> Result<Node, String> {
        let Some(c) = self.next() else {
            return Ok(Node::Empty);
        };
        Ok(match c {
            '(' => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(format!("groups nest deeper than {MAX_DEPTH} levels"));
                }
                if self.peek() == Some('?') {
                    if self.chars.get(self.pos + 1) == Some(&':') {
                        self.pos += 2;
                    } else {
                        return Err(
                            "unsupported group syntax '(?' (flags and named groups)".to_string()
                        );
                    }
                }
                let inner = self.parse_alternate()?;
                if self.next() != Some(')') {
                    return Err("missing ')'".to_string());
                }
                self.depth -= 1;
                inner
            }
            '[' => Node::Class(self.parse_class()?),
            '.' => Node::Any,
            '^' => Node::Assert(Assertion::Start),
            '$' => Node::Assert(Assertion::End),
            '*' | '+' | '?' => {
                return Err(format!("missing argument to repetition operator '{c}'"))
            }
            '\\' => match self.parse_escape()? {
                Escape::Char(c) => Node::Literal(c),
                Escape::Class(kind, neg) => Node::Class(Class::perl(kind, neg)),
                Escape::Assert(a) => Node::Assert(a),
            },
            c => Node::Literal(c),
        })
    }

    /// The character after a backslash (already consumed).
    pub(super) fn parse_escape(&mut self) -> Result<Escape, String> {
        let Some(c) = self.next() else {
            return Err("trailing backslash at end of pattern".to_string());
        };
        Ok(match c {
            'd' => Escape::Class(Perl::Digit, false),
            'D' => Escape::Class(Perl::Digit, true),
            'w' => Escape::Class(Perl::Word, false),
            'W' => Escape::Class(Perl::Word, true),
            's' => Escape::Class(Perl::Space, false),
            'S' => Escape::Class(Perl::Space, true),
            'b' => Escape::Assert(Assertion::WordBoundary),
            'B' => Escape::Assert(Assertion::NotWordBoundary),
            'A' => Escape::Assert(Assertion::Start),
            'z' => Escape::Assert(Assertion::End),
            'n' => Escape::Char('\n'),
            't' => Escape::Char('\t'),
            'r' => Escape::Char('\r'),
            'f' => Escape::Char('\x0c'),
            'v' => Escape::Char('\x0b'),
            c if c.is_ascii_punctuation() => Escape::Char(c),
            c => return Err(format!("unsupported escape '\\{c}'")),
        })
    }

    /// After `[`: `^`? then items up to `]` (a `]` first is literal, as in Go).
    pub(super) fn parse_class(&mut self) -> Result<Class, String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.next() else {
                return Err("missing ']' to close a character class".to_string());
            };
            if c == ']' && !first {
                return Ok(Class { items, negated });
            }
            first = false;
            if c == '[' && self.peek() == Some(':') {
                return Err("unsupported POSIX class '[:...:]'".to_string());
            }
            let lo = match self.class_char(c)? {
                Ok(lo) => lo,
                Err((kind, neg)) => {
                    items.push(ClassItem::Perl(kind, neg));
                    continue;
                }
            };
            let is_range = self.peek() == Some('-')
                && !matches!(self.chars.get(self.pos + 1), None | Some(']'));
            if !is_range {
                items.push(ClassItem::Range(lo, lo));
                continue;
            }
            self.pos += 1;
            let c = self.next().unwrap_or(']');
            let Ok(hi) = self.class_char(c)? else {
                return Err("invalid character class range".to_string());
            };
            if hi < lo {
                return Err(format!("invalid character class range '{lo}-{hi}'"));
            }
            items.push(ClassItem::Range(lo, hi));
        }
    }

    /// One class member: a character, or a `\d`-style shorthand as `Err`.
    pub(super) fn class_char(&mut self, c: char) -> Result<Result<char, (Perl, bool)>, String> {
        if c != '\\' {
            return Ok(Ok(c));
        }
        match self.parse_escape()? {
            Escape::Char(c) => Ok(Ok(c)),
            Escape::Class(kind, neg) => Ok(Err((kind, neg))),
            Escape::Assert(_) => Err("assertion escape inside a character class".to_string()),
        }
    }
}

impl Pattern {
    pub(super) fn new(pattern: &str) -> Result<Pattern, String> {
        let mut parser = PatternParser {
            chars: pattern.chars().collect(),
            pos: 0,
            depth: 0,
        };
        let node = parser.parse_alternate()?;
        if parser.pos < parser.chars.len() {
            // parse_alternate stops only at the end or at an unmatched ')'.
            return Err("unexpected ')'".to_string());
        }
        let mut program = Vec::new();
        compile(&node, &mut program)?;
        push(&mut program, Inst::Match)?;
        Ok(Pattern { program })
    }

    pub(super) fn is_match(&self, text: &str) -> bool {
        self.is_match_within(text, STEP_BUDGET)
    }

    /// Unanchored search with at most `budget` steps; `false` once the budget is spent.
    pub(super) fn is_match_within(&self, text: &str, budget: usize) -> bool {
        let text: Vec<char> = text.chars().collect();
        let width = text.len() + 1;
        let mut visited = Visited::new(self.program.len() * width);
        let mut steps = 0usize;
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for start in 0..width {
            stack.push((0, start));
            while let Some((mut pc, mut at)) = stack.pop() {
                // Follow one thread until it fails; Split pushes the alternative.
                loop {
                    if !visited.insert(pc * width + at) {
                        break;
                    }
                    steps += 1;
                    if steps > budget {
                        return false;
                    }
                    match &self.program[pc] {
                        Inst::Literal(c) => {
                            if text.get(at) != Some(c) {
                                break;
                            }
                            pc += 1;
                            at += 1;
                        }
                        Inst::Any => {
                            if text.get(at).is_none_or(|&c| c == '\n') {
                                break;
                            }
                            pc += 1;
                            at += 1;
                        }
                        Inst::Class(class) => {
                            if !text.get(at).is_some_and(|&c| class.has(c)) {
                                break;
                            }
                            pc += 1;
                            at += 1;
                        }
                        Inst::Assert(a) => {
                            if !assertion_holds(*a, &text, at) {
                                break;
                            }
                            pc += 1;
                        }
                        Inst::Split(first, second) => {
                            stack.push((*second, at));
                            pc = *first;
                        }
                        Inst::Jump(to) => pc = *to,
                        Inst::Match => return true,
                    }
                }
            }
        }
        false
    }
}

pub(super) fn assertion_holds(a: Assertion, text: &[char], at: usize) -> bool {
    let word = |i: Option<usize>| {
        i.and_then(|i| text.get(i))
            .is_some_and(|&c| Perl::Word.has(c))
    };
    match a {
        Assertion::Start => at == 0,
        Assertion::End => at == text.len(),
        Assertion::WordBoundary => word(at.checked_sub(1)) != word(Some(at)),
        Assertion::NotWordBoundary => word(at.checked_sub(1)) == word(Some(at)),
    }
}

/// The (instruction, position) pairs already explored: a bit set when small, else a hash set
/// (which the step budget keeps under [`STEP_BUDGET`] entries).
pub(super) enum Visited {
    Bits(Vec<u64>),
    Set(HashSet<usize>),
}

impl Visited {
    pub(super) fn new(states: usize) -> Visited {
        if states <= 1 << 16 {
            Visited::Bits(vec![0; states.div_ceil(64)])
        } else {
            Visited::Set(HashSet::new())
        }
    }

    /// Marks `state`; `false` if it was already marked.
    pub(super) fn insert(&mut self, state: usize) -> bool {
        match self {
            Visited::Bits(bits) => {
                let (word, bit) = (state / 64, 1u64 << (state % 64));
                let fresh = bits[word] & bit == 0;
                bits[word] |= bit;
                fresh
            }
            Visited::Set(set) => set.insert(state),
        }
    }
}

pub(super) fn push(program: &mut Vec<Inst>, inst: Inst) -> Result<usize, String> {
    if program.len() >= MAX_PROGRAM {
        return Err(format!(
            "pattern too large (over {MAX_PROGRAM} instructions)"
        ));
    }
    program.push(inst);
    Ok(program.len() - 1)
}

pub(super) fn compile(node: &Node, program: &mut Vec<Inst>) -> Result<(), String> {
    match node {
        Node::Empty => {}
        Node::Literal(c) => {
            push(program, Inst::Literal(*c))?;
        }
        Node::Any => {
            push(program, Inst::Any)?;
        }
        Node::Class(class) => {
            push(program, Inst::Class(class.clone()))?;
        }
        Node::Assert(a) => {
            push(program, Inst::Assert(*a))?;
        }
        Node::Concat(items) => {
            for item in items {
                compile(item, program)?;
            }
        }
        Node::Alternate(branches) => {
            let mut jumps = Vec::new();
            for (i, branch) in branches.iter().enumerate() {
                if i + 1 == branches.len() {
                    compile(branch, program)?;
                    break;
                }
                let split = push(program, Inst::Split(0, 0))?;
                compile(branch, program)?;
                jumps.push(push(program, Inst::Jump(0))?);
                program[split] = Inst::Split(split + 1, program.len());
            }
            let end = program.len();
            for jump in jumps {
                program[jump] = Inst::Jump(end);
            }
        }
        Node::Repeat {
            node,
            min,
            max,
            greedy,
        } => {
            for _ in 0..*min {
                compile(node, program)?;
            }
            let split_to = |split: usize, end: usize| {
                if *greedy {
                    Inst::Split(split + 1, end)
                } else {
                    Inst::Split(end, split + 1)
                }
            };
            match max {
                None => {
                    let split = push(program, Inst::Split(0, 0))?;
                    compile(node, program)?;
                    push(program, Inst::Jump(split))?;
                    program[split] = split_to(split, program.len());
                }
                Some(max) => {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(push(program, Inst::Split(0, 0))?);
                        compile(node, program)?;
                    }
                    let end = program.len();
                    for split in splits {
                        program[split] = split_to(split, end);
                    }
                }
            }
        }
    }
    Ok(())
}
