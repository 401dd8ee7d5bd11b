//! One domain's fuzzy watches on this node (services or configuration items): each
//! pattern watched, the present items it matches — at most `max_matches` of them, as
//! Nacos keeps them — and the connections watching it. Plain synchronous state: the
//! caller holds it under a lock, reads the registry or the store through the `scan` it
//! passes, and sends what the answers say.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::pattern::{Item, Pattern};

/// The bounds of one domain's watches (Nacos: 20 patterns, 500 matches each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Most distinct patterns watched on this node at once.
    pub max_patterns: usize,
    /// Most items one pattern keeps (and tells of).
    pub max_matches: usize,
}

/// A pattern watched, what it matches and who watches it.
pub struct Watched<W> {
    /// The pattern.
    pub pattern: Pattern,
    /// The present items it matches, at most [`Bounds::max_matches`].
    pub matched: BTreeSet<Item>,
    /// Its watchers, by connection client id.
    pub watchers: HashMap<Arc<str>, W>,
}

/// The node watches as many patterns as it may: a new one is refused.
#[derive(Debug, PartialEq, Eq)]
pub struct PatternsFull;

/// A change of a pattern's matched items: the item, and whether it came (or went).
pub type MatchChange = (Item, bool);

/// Every pattern of one domain watched on this node.
pub struct Watches<W> {
    bounds: Bounds,
    patterns: HashMap<String, Watched<W>>,
}

impl<W> Watches<W> {
    /// No watches, within `bounds`.
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            patterns: HashMap::new(),
        }
    }

    /// Whether nothing is watched (changes then cost nothing).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `watched` keeps as many items as a pattern may: it may then match more
    /// than it tells of.
    pub fn is_full(&self, watched: &Watched<W>) -> bool {
        watched.matched.len() >= self.bounds.max_matches
    }

    /// Adds watcher `id` (or replaces it) to `pattern`. A pattern not watched yet is
    /// first matched against the present items (`scan` visits those it matches until
    /// told to stop), keeping at most `max_matches`; it is refused when the node
    /// watches `max_patterns` others already.
    pub fn watch<S>(
        &mut self,
        pattern: Pattern,
        id: Arc<str>,
        watcher: W,
        scan: S,
    ) -> Result<&Watched<W>, PatternsFull>
    where
        S: FnOnce(&Pattern, &mut dyn FnMut(Item) -> bool),
    {
        let max = self.bounds.max_matches;
        if !self.patterns.contains_key(&pattern.raw) {
            if self.patterns.len() >= self.bounds.max_patterns {
                return Err(PatternsFull);
            }
            let mut matched = BTreeSet::new();
            scan(&pattern, &mut |item| {
                if matched.len() >= max {
                    return false;
                }
                matched.insert(item);
                true
            });
            let watched = Watched {
                pattern: pattern.clone(),
                matched,
                watchers: HashMap::new(),
            };
            self.patterns.insert(pattern.raw.clone(), watched);
        }
        let watched = self.patterns.get_mut(&pattern.raw).expect("inserted above");
        watched.watchers.insert(id, watcher);
        Ok(watched)
    }

    /// The pattern written `raw`, if watched.
    pub fn get(&self, raw: &str) -> Option<&Watched<W>> {
        self.patterns.get(raw)
    }

    /// Ends watcher `id`'s watch of pattern `raw`; a pattern nobody watches is dropped.
    pub fn cancel(&mut self, raw: &str, id: &str) {
        if let Some(watched) = self.patterns.get_mut(raw) {
            watched.watchers.remove(id);
            if watched.watchers.is_empty() {
                self.patterns.remove(raw);
            }
        }
    }

    /// Ends every watch of watcher `id` (its connection is gone).
    pub fn forget(&mut self, id: &str) {
        self.patterns.retain(|_, watched| {
            watched.watchers.remove(id);
            !watched.watchers.is_empty()
        });
    }

    /// Records that `item` is now `present` (or not) in every pattern matching it, and
    /// returns the patterns whose matched items changed, with their changes. An item
    /// that comes to a full pattern is left out; one that goes from a full pattern
    /// makes room, which the present items it did not keep fill (`scan`, as in
    /// [`Watches::watch`]), each told of as come.
    pub fn changed<S>(
        &mut self,
        item: &Item,
        present: bool,
        mut scan: S,
    ) -> Vec<(String, Vec<MatchChange>)>
    where
        S: FnMut(&Pattern, &mut dyn FnMut(Item) -> bool),
    {
        let max = self.bounds.max_matches;
        let mut out = Vec::new();
        for (raw, watched) in &mut self.patterns {
            if !watched.pattern.matches_item(item) {
                continue;
            }
            let held = watched.matched.contains(item);
            let full = watched.matched.len() >= max;
            let mut changes = Vec::new();
            if present && !held && !full {
                watched.matched.insert(item.clone());
                changes.push((item.clone(), true));
            } else if !present && held {
                watched.matched.remove(item);
                changes.push((item.clone(), false));
                if full {
                    let matched = &mut watched.matched;
                    scan(&watched.pattern, &mut |other| {
                        if matched.len() >= max {
                            return false;
                        }
                        if other != *item && matched.insert(other.clone()) {
                            changes.push((other, true));
                        }
                        true
                    });
                }
            }
            if !changes.is_empty() {
                out.push((raw.clone(), changes));
            }
        }
        out
    }
}

/// What a watcher is told when it (re)watches a pattern: each key it lacks as come
/// (`true`) and each it holds that is gone (`false`), ordered by key. When the pattern
/// is `full` its matched keys may not be all there are, so nothing is told gone.
pub fn diff(
    matched: &BTreeSet<String>,
    received: &HashSet<String>,
    full: bool,
) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = matched
        .iter()
        .filter(|k| !received.contains(*k))
        .map(|k| (k.clone(), true))
        .collect();
    if !full {
        out.extend(
            received
                .iter()
                .filter(|k| !matched.contains(*k))
                .map(|k| (k.clone(), false)),
        );
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str) -> Item {
        Item {
            namespace: "public".into(),
            group: "G".into(),
            name: name.into(),
        }
    }

    fn pattern(raw: &str) -> Pattern {
        Pattern::parse("groupKeyPattern", raw).unwrap()
    }

    /// A scan over `present`, as the registry or the store would answer it.
    fn over<'a>(present: &'a [&'a str]) -> impl FnMut(&Pattern, &mut dyn FnMut(Item) -> bool) + 'a {
        move |p, visit| {
            for name in present {
                let it = item(name);
                if p.matches_item(&it) && !visit(it) {
                    return;
                }
            }
        }
    }

    fn bounds(max_patterns: usize, max_matches: usize) -> Bounds {
        Bounds {
            max_patterns,
            max_matches,
        }
    }

    #[test]
    fn distinct_patterns_are_bounded_and_a_pattern_goes_with_its_last_watcher() {
        let mut w: Watches<()> = Watches::new(bounds(2, 10));
        let present = ["a", "b"];
        w.watch(pattern("public>>G>>a*"), "c1".into(), (), over(&present))
            .unwrap();
        w.watch(pattern("public>>G>>b*"), "c1".into(), (), over(&present))
            .unwrap();
        // A third pattern is refused; one already watched takes another watcher.
        let third = w.watch(pattern("public>>G>>*"), "c2".into(), (), over(&present));
        assert_eq!(third.err(), Some(PatternsFull));
        let again = w.watch(pattern("public>>G>>a*"), "c2".into(), (), over(&present));
        assert_eq!(again.unwrap().watchers.len(), 2);
        // Room comes back when a pattern loses its last watcher.
        w.cancel("public>>G>>b*", "c1");
        assert!(w.get("public>>G>>b*").is_none());
        w.forget("c1");
        assert!(w.get("public>>G>>a*").is_some());
        w.forget("c2");
        assert!(w.is_empty());
    }

    #[test]
    fn a_pattern_keeps_at_most_max_matches_and_tells_only_of_those() {
        let mut w: Watches<()> = Watches::new(bounds(20, 2));
        let present = ["a1", "a2", "a3"];
        let watched = w
            .watch(pattern("public>>G>>a*"), "c".into(), (), over(&present))
            .unwrap();
        assert_eq!(watched.matched.len(), 2);
        assert!(w.is_full(w.get("public>>G>>a*").unwrap()));
        // Full: a new item is left out.
        assert!(w.changed(&item("a4"), true, over(&present)).is_empty());
        // An item going makes room, filled from what is present and not kept.
        let present = ["a2", "a3", "a4"];
        let changes = w.changed(&item("a1"), false, over(&present));
        assert_eq!(
            changes,
            [(
                "public>>G>>a*".to_string(),
                vec![(item("a1"), false), (item("a3"), true)]
            )]
        );
        // Not full: an item comes and goes, each told once.
        let mut w: Watches<()> = Watches::new(bounds(20, 10));
        w.watch(pattern("public>>G>>*"), "c".into(), (), over(&[]))
            .unwrap();
        let came = w.changed(&item("x"), true, over(&["x"]));
        assert_eq!(came[0].1, [(item("x"), true)]);
        assert!(w.changed(&item("x"), true, over(&["x"])).is_empty());
        let went = w.changed(&item("x"), false, over(&[]));
        assert_eq!(went[0].1, [(item("x"), false)]);
        // An item the pattern does not match changes nothing.
        let other = Item {
            namespace: "dev".into(),
            ..item("x")
        };
        assert!(w.changed(&other, true, over(&[])).is_empty());
    }

    #[test]
    fn a_resync_tells_what_the_client_lacks_and_holds_wrongly_unless_full() {
        let matched: BTreeSet<String> = ["a", "b"].map(String::from).into();
        let received: HashSet<String> = ["b", "z"].map(String::from).into();
        let told = diff(&matched, &received, false);
        assert_eq!(told, [("a".to_string(), true), ("z".to_string(), false)]);
        let told = diff(&matched, &received, true);
        assert_eq!(told, [("a".to_string(), true)]);
        assert!(diff(&matched, &["a", "b"].map(String::from).into(), false).is_empty());
    }
}
