//! The shape of a crate's modules, read from its source: which module file uses the items of
//! which, and what tests/it/layout.rs holds the crate and this kit to: no import circles, no
//! import that runs back up to an ancestor's own file, no long files.
//!
//! A module file uses another when it names one of that file's items: in a `use` tree, or in a
//! path in its code (`crate::a::b`, `super::x`, `self::y`, `child::z`, or through a name a `use`
//! bound to a module). Re-exports are followed to the file that defines the item, so that
//! `crate::store::StoreError` counts as a use of whichever file defines `StoreError`, whatever
//! `store/mod.rs` re-exports. A `mod` line is not a use.
//!
//! Test code (an item under `#[cfg(test)]`: a `mod tests`, a module file only tests compile, a
//! helper) is left out: a test may reach wherever it needs to. Code under
//! `#[cfg(any(test, feature = ...))]` is in.
//!
//! It reads tokens, not syntax trees: macros that define items, `#[path]` and modules declared
//! inside an inline module are not followed; a path it cannot follow is listed in
//! [`Layout::unresolved`], so that the check never passes by missing a use.

mod tokens;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use tokens::{Token, tokens};

/// A module's path from the crate root (`["elector", "keep"]`; the root is empty).
type ModPath = Vec<String>;

/// What one crate's module files use of each other.
#[derive(Debug, Default)]
pub struct Layout {
    /// Each module file (relative to the directory given to [`Layout::read`]) and the files
    /// whose items it uses, with those items' names.
    pub uses: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Each module file's ancestors' own files (the crate root, `mod.rs` files, `a.rs` for
    /// `a/b.rs`).
    ancestors: BTreeMap<String, BTreeSet<String>>,
    /// Paths into the crate that could not be followed to an item: `file: a::b::c`.
    pub unresolved: BTreeSet<String>,
}

/// Something the layout check reports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Finding {
    /// Files that use each other's items, directly or through one another (a strongly
    /// connected component of more than one file).
    Circle(Vec<String>),
    /// `from` uses items defined in `to`, the own file of one of its ancestors.
    Climb {
        from: String,
        to: String,
        items: BTreeSet<String>,
    },
    /// A file of more than the allowed number of lines.
    Long { file: String, lines: usize },
}

impl Finding {
    /// What identifies it, without the details that change with every edit: `circle a b`,
    /// `climb a -> b`, `long a`.
    pub fn key(&self) -> String {
        match self {
            Finding::Circle(files) => format!("circle {}", files.join(" ")),
            Finding::Climb { from, to, .. } => format!("climb {from} -> {to}"),
            Finding::Long { file, .. } => format!("long {file}"),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Circle(files) => write!(f, "import circle: {}", files.join(" <-> ")),
            Finding::Climb { from, to, items } => write!(
                f,
                "import running back up: {from} uses {} defined in {to}",
                items.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
            Finding::Long { file, lines } => write!(f, "long file: {file} has {lines} lines"),
        }
    }
}

impl Layout {
    /// Reads the crate whose root file is `dir/root` (`src/lib.rs`), following its `mod`
    /// declarations. Files are named relative to `dir` (`src/store/mod.rs`).
    pub fn read(dir: &Path, root: &str) -> Layout {
        let mut reader = Reader {
            dir: dir.to_owned(),
            modules: BTreeMap::new(),
            references: Vec::new(),
        };
        reader.read_file(Vec::new(), &dir.join(root));
        reader.layout()
    }

    /// The circles and climbs, in a stable order.
    pub fn findings(&self) -> Vec<Finding> {
        let mut found: Vec<Finding> = circles(&self.uses)
            .into_iter()
            .map(Finding::Circle)
            .collect();
        for (from, targets) in &self.uses {
            for (to, items) in targets {
                if self.ancestors.get(from).is_some_and(|a| a.contains(to)) {
                    found.push(Finding::Climb {
                        from: from.clone(),
                        to: to.clone(),
                        items: items.clone(),
                    });
                }
            }
        }
        found.sort();
        found
    }

    /// The arrows as lines, `from -> to (items)`, for people.
    pub fn arrows(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (from, targets) in &self.uses {
            for (to, items) in targets {
                let items: Vec<&str> = items.iter().map(String::as_str).collect();
                lines.push(format!("{from} -> {to} ({})", items.join(", ")));
            }
        }
        lines
    }
}

/// Every `.rs` file under `dir` (relative to `base`) of more than `max` lines.
pub fn long_files(base: &Path, dir: &str, max: usize) -> Vec<Finding> {
    let mut found = Vec::new();
    for path in files_under(base, dir, &[".rs"]) {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        if lines > max {
            found.push(Finding::Long {
                file: relative(base, &path),
                lines,
            });
        }
    }
    found.sort();
    found
}

/// Every line of a file under `base/dir` whose name ends with one of `endings` that contains
/// `needle` (ignoring case), as `file:line: text`, sorted.
pub fn lines_containing(base: &Path, dir: &str, endings: &[&str], needle: &str) -> Vec<String> {
    let needle = needle.to_lowercase();
    let mut found = Vec::new();
    for path in files_under(base, dir, endings) {
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.to_lowercase().contains(&needle) {
                let file = relative(base, &path);
                found.push(format!("{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found.sort();
    found
}

/// Every file under `base/dir`, at any depth, whose name ends with one of `endings`.
fn files_under(base: &Path, dir: &str, endings: &[&str]) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![base.join(dir)];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if endings.iter().any(|e| path.to_string_lossy().ends_with(e)) {
                files.push(path);
            }
        }
    }
    files
}

fn relative(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// What a name in a module stands for.
#[derive(Debug, Clone)]
enum Binding {
    /// A module declared there.
    Module(ModPath),
    /// An item defined there (a function, type, trait, constant, static, macro).
    Item,
    /// A name a `use` brought in: `path` as written, read from `scope`.
    Import { scope: ModPath, path: Vec<String> },
}

#[derive(Debug, Default)]
struct Module {
    /// The file it is written in.
    file: String,
    /// Whether that file is its own (not an inline `mod x { ... }`).
    own_file: bool,
    names: BTreeMap<String, Vec<Binding>>,
    /// `use path::*` (scope, path).
    globs: Vec<(ModPath, Vec<String>)>,
}

/// A path into the crate found in a file: a `use` or a path in code.
struct Reference {
    scope: ModPath,
    path: Vec<String>,
}

/// Where a path leads.
enum Target {
    Item(ModPath, String),
    Module(ModPath),
    /// Outside the crate (another crate, the prelude, a local name or generic).
    Outside,
    Unknown,
}

struct Reader {
    dir: PathBuf,
    modules: BTreeMap<ModPath, Module>,
    references: Vec<Reference>,
}

impl Reader {
    /// Reads module `module` from `file`, and the module files it declares.
    fn read_file(&mut self, module: ModPath, file: &Path) {
        let source = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let name = relative(&self.dir, file);
        self.modules.insert(
            module.clone(),
            Module {
                file: name.clone(),
                own_file: true,
                ..Module::default()
            },
        );
        let toks = tokens(&source);
        let mut files = Vec::new();
        FileScan {
            reader: self,
            toks: &toks,
            file: name,
            module,
            inline: Vec::new(),
            depth: 0,
            files: &mut files,
        }
        .run();
        for (child, dir_of) in files {
            let name = child.last().unwrap().clone();
            let (flat, nested) = (
                dir_of.join(format!("{name}.rs")),
                dir_of.join(&name).join("mod.rs"),
            );
            if flat.exists() {
                self.read_file(child, &flat);
            } else if nested.exists() {
                self.read_file(child, &nested);
            } else {
                panic!("module {} has no file", child.join("::"));
            }
        }
    }

    fn layout(self) -> Layout {
        let mut layout = Layout::default();
        for (path, m) in &self.modules {
            if !m.own_file {
                continue;
            }
            layout.uses.entry(m.file.clone()).or_default();
            let ancestors = (0..path.len())
                .filter_map(|n| self.modules.get(&path[..n]))
                .filter(|a| a.own_file && a.file != m.file)
                .map(|a| a.file.clone())
                .collect();
            layout.ancestors.insert(m.file.clone(), ancestors);
        }
        for r in &self.references {
            let from = self.modules[&r.scope].file.clone();
            match self.resolve(&r.scope, &r.path, 0) {
                Target::Item(module, item) => {
                    let to = &self.modules[&module].file;
                    if *to != from {
                        layout
                            .uses
                            .entry(from)
                            .or_default()
                            .entry(to.clone())
                            .or_default()
                            .insert(item);
                    }
                }
                Target::Unknown => {
                    layout
                        .unresolved
                        .insert(format!("{from}: {}", r.path.join("::")));
                }
                Target::Module(_) | Target::Outside => {}
            }
        }
        layout
    }

    /// Where `path`, written in module `scope`, leads.
    fn resolve(&self, scope: &ModPath, path: &[String], hops: usize) -> Target {
        if hops > 32 || path.is_empty() {
            return Target::Unknown;
        }
        let (mut current, rest, relative) = match path[0].as_str() {
            "crate" => (Vec::new(), &path[1..], false),
            "super" | "self" => (scope.clone(), path, false),
            _ => (scope.clone(), path, true),
        };
        for (k, segment) in rest.iter().enumerate() {
            match segment.as_str() {
                "super" => {
                    if current.pop().is_none() {
                        return Target::Unknown;
                    }
                    continue;
                }
                "self" => continue,
                _ => {}
            }
            let more = k + 1 < rest.len();
            match self.lookup(&current, segment, more, hops) {
                Some(Target::Module(m)) => current = m,
                Some(Target::Item(m, item)) => return Target::Item(m, item),
                Some(other) => return other,
                None if relative && k == 0 => return Target::Outside,
                None => return Target::Unknown,
            }
        }
        Target::Module(current)
    }

    /// What `name` stands for in `module`: a module or an item, following imports and globs.
    fn lookup(&self, module: &ModPath, name: &str, more: bool, hops: usize) -> Option<Target> {
        let m = self.modules.get(module)?;
        let mut found = Vec::new();
        for binding in m.names.get(name).into_iter().flatten() {
            found.push(match binding {
                Binding::Module(p) => Target::Module(p.clone()),
                Binding::Item => Target::Item(module.clone(), name.to_owned()),
                Binding::Import { scope, path } => self.resolve(scope, path, hops + 1),
            });
        }
        // Types and modules share a namespace, values have their own: a path that goes on
        // goes through a module, one that ends names an item.
        let pick = |found: Vec<Target>| {
            let (modules, others): (Vec<_>, Vec<_>) = found
                .into_iter()
                .partition(|t| matches!(t, Target::Module(_)));
            let (items, rest): (Vec<_>, Vec<_>) = others
                .into_iter()
                .partition(|t| matches!(t, Target::Item(..)));
            let mut order = if more {
                [modules, items, rest]
            } else {
                [items, modules, rest]
            };
            order
                .iter_mut()
                .find_map(|v| (!v.is_empty()).then(|| v.remove(0)))
        };
        if let Some(t) = pick(found) {
            return Some(t);
        }
        for (scope, path) in &m.globs {
            if let Target::Module(target) = self.resolve(scope, path, hops + 1)
                && target != *module
                && let Some(t) = self.lookup(&target, name, more, hops + 1)
            {
                return Some(t);
            }
        }
        None
    }
}

/// One pass over a file's tokens.
struct FileScan<'a> {
    reader: &'a mut Reader,
    toks: &'a [Token],
    file: String,
    /// The file's module.
    module: ModPath,
    /// Inline modules open at this point, with the brace depth of their bodies.
    inline: Vec<(String, usize)>,
    depth: usize,
    /// Module files declared here (`mod x;`), with the folder their files are in.
    files: &'a mut Vec<(ModPath, PathBuf)>,
}

impl FileScan<'_> {
    fn scope(&self) -> ModPath {
        let mut scope = self.module.clone();
        scope.extend(self.inline.iter().map(|(n, _)| n.clone()));
        scope
    }

    /// Whether the scan is where a module's items are (not inside a function or a type).
    fn at_item_level(&self) -> bool {
        self.depth == self.inline.last().map_or(0, |(_, d)| *d)
    }

    fn ident(&self, i: usize) -> Option<&str> {
        match self.toks.get(i) {
            Some(Token::Ident(w)) => Some(w),
            _ => None,
        }
    }

    fn punct(&self, i: usize, c: char) -> bool {
        self.toks.get(i) == Some(&Token::Punct(c))
    }

    fn bind(&mut self, name: &str, binding: Binding) {
        let scope = self.scope();
        let module = self.reader.modules.get_mut(&scope).unwrap();
        module
            .names
            .entry(name.to_owned())
            .or_default()
            .push(binding);
    }

    fn run(mut self) {
        let mut i = 0;
        while i < self.toks.len() {
            i = self.step(i);
        }
    }

    /// Reads what starts at `i`; returns where to go on.
    fn step(&mut self, i: usize) -> usize {
        let toks = self.toks;
        match &toks[i] {
            Token::Punct('#') => return self.attribute(i),
            Token::Punct('{') => self.depth += 1,
            Token::Punct('}') => {
                self.depth = self.depth.saturating_sub(1);
                if self.inline.last().is_some_and(|(_, d)| self.depth < *d) {
                    self.inline.pop();
                }
            }
            Token::Ident(w) => return self.word(i, w),
            _ => {}
        }
        i + 1
    }

    /// An attribute at `i`; `#[cfg(test)]` makes the item after it left out.
    fn attribute(&mut self, i: usize) -> usize {
        let mut j = i + 1;
        if self.punct(j, '!') {
            j += 1;
        }
        if !self.punct(j, '[') {
            return i + 1;
        }
        let end = self.closing(j);
        let test_only = self.ident(j + 1) == Some("cfg")
            && self.punct(j + 2, '(')
            && self.implies_test(j + 3).0;
        if test_only {
            self.skip_item(end + 1)
        } else {
            end + 1
        }
    }

    /// Whether the `cfg` predicate at `i` holds only in tests (`test`, `all(test, ...)`,
    /// `any(...)` of such), and where it ends.
    fn implies_test(&self, i: usize) -> (bool, usize) {
        match self.ident(i) {
            Some(op @ ("all" | "any" | "not")) if self.punct(i + 1, '(') => {
                let end = self.closing(i + 1);
                let mut parts = Vec::new();
                let mut k = i + 2;
                while k < end {
                    let (implies, next) = self.implies_test(k);
                    parts.push(implies);
                    k = next;
                    while k < end && !self.punct(k, ',') {
                        k += 1;
                    }
                    k += 1;
                }
                let implies = match op {
                    "all" => parts.iter().any(|p| *p),
                    "any" => !parts.is_empty() && parts.iter().all(|p| *p),
                    _ => false,
                };
                (implies, end + 1)
            }
            Some(word) => (word == "test" && !self.punct(i + 1, '='), i + 1),
            None => (false, i + 1),
        }
    }

    /// The index of the bracket that closes the one at `open`.
    fn closing(&self, open: usize) -> usize {
        let mut nesting = 0usize;
        for (k, t) in self.toks.iter().enumerate().skip(open) {
            match t {
                Token::Punct('(' | '[' | '{') => nesting += 1,
                Token::Punct(')' | ']' | '}') => {
                    nesting -= 1;
                    if nesting == 0 {
                        return k;
                    }
                }
                _ => {}
            }
        }
        self.toks.len() - 1
    }

    /// Past the item (or field, statement, match arm) starting at `i`, which only tests compile.
    fn skip_item(&mut self, mut i: usize) -> usize {
        let item_level = self.at_item_level();
        // Its other attributes.
        while self.punct(i, '#') && self.punct(i + 1, '[') {
            i = self.closing(i + 1) + 1;
        }
        let mut k = i;
        if self.ident(k) == Some("pub") {
            k += 1;
            if self.punct(k, '(') {
                k = self.closing(k) + 1;
            }
        }
        if self.ident(k) == Some("mod") && self.punct(k + 2, ';') {
            // A module file only tests compile: not read.
            return k + 3;
        }
        let mut nesting = 0usize;
        while i < self.toks.len() {
            match &self.toks[i] {
                Token::Punct('(' | '[' | '{') => nesting += 1,
                Token::Punct(')' | ']') => nesting = nesting.saturating_sub(1),
                Token::Punct('}') => {
                    if nesting == 0 {
                        return i; // the end of the enclosing block: not ours
                    }
                    nesting -= 1;
                    if nesting == 0 {
                        return i + 1;
                    }
                }
                Token::Punct(';') if nesting == 0 => return i + 1,
                Token::Punct(',') if nesting == 0 && !item_level => return i + 1,
                _ => {}
            }
            i += 1;
        }
        i
    }

    /// An identifier at `i`: an item, a `mod`, a `use`, or the start of a path.
    fn word(&mut self, i: usize, w: &str) -> usize {
        let item_level = self.at_item_level();
        let next = self.ident(i + 1).map(str::to_owned);
        match w {
            "use" if !self.punct(i + 1, '<') => return self.use_declaration(i + 1, item_level),
            "mod" if item_level => {
                if let Some(name) = next {
                    let mut child = self.scope();
                    child.push(name.clone());
                    self.bind(&name, Binding::Module(child.clone()));
                    if self.punct(i + 2, ';') {
                        let mut dir = self.children_dir();
                        for (n, _) in &self.inline {
                            dir = dir.join(n);
                        }
                        self.files.push((child, dir));
                        return i + 3;
                    }
                    if self.punct(i + 2, '{') {
                        self.reader.modules.insert(
                            child,
                            Module {
                                file: self.file.clone(),
                                ..Module::default()
                            },
                        );
                        self.depth += 1;
                        self.inline.push((name, self.depth));
                        return i + 3;
                    }
                }
            }
            "fn" | "struct" | "enum" | "union" | "trait" | "type" | "const" | "static"
                if item_level =>
            {
                let name = match (w, next.as_deref()) {
                    ("const", Some("fn")) => None, // `const fn`: the `fn` names it
                    ("static", Some("mut")) => self.ident(i + 2).map(str::to_owned),
                    (_, Some(name)) if name != "_" => Some(name.to_owned()),
                    _ => None,
                };
                if let Some(name) = name {
                    self.bind(&name, Binding::Item);
                }
            }
            "macro_rules" if item_level && self.punct(i + 1, '!') => {
                if let Some(name) = self.ident(i + 2).map(str::to_owned) {
                    self.bind(&name, Binding::Item);
                }
                // The items a macro declares, taken as this module's (where it is used).
                if matches!(self.toks.get(i + 3), Some(Token::Punct('{' | '(' | '['))) {
                    let end = self.closing(i + 3);
                    for k in i + 4..end {
                        let declares = matches!(
                            self.ident(k),
                            Some("struct" | "enum" | "trait" | "type" | "union")
                        );
                        if declares
                            && !self.punct(k - 1, '$')
                            && let Some(name) = self.ident(k + 1).map(str::to_owned)
                        {
                            self.bind(&name, Binding::Item);
                        }
                    }
                }
            }
            _ => {}
        }
        // A path in code: `a::b::c` (not the middle of one).
        if self.toks.get(i + 1) == Some(&Token::PathSep)
            && (i == 0 || self.toks[i - 1] != Token::PathSep)
        {
            let mut path = vec![w.to_owned()];
            let mut j = i + 1;
            while self.toks.get(j) == Some(&Token::PathSep) {
                match self.ident(j + 1) {
                    Some(seg) => {
                        path.push(seg.to_owned());
                        j += 2;
                    }
                    None => break,
                }
            }
            let scope = self.scope();
            self.reader.references.push(Reference { scope, path });
            return j;
        }
        i + 1
    }

    /// The folder of the module files this file declares.
    fn children_dir(&self) -> PathBuf {
        let file = self.reader.dir.join(&self.file);
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let parent = file.parent().unwrap().to_owned();
        if self.module.is_empty() || stem == "mod" {
            parent
        } else {
            parent.join(stem)
        }
    }

    /// A `use` tree starting at `i`, to its `;`.
    fn use_declaration(&mut self, i: usize, item_level: bool) -> usize {
        let mut imports = Vec::new();
        let mut j = i;
        if self.toks.get(j) == Some(&Token::PathSep) {
            j += 1;
        }
        j = self.use_tree(j, Vec::new(), &mut imports);
        while j < self.toks.len() && !self.punct(j, ';') {
            j += 1;
        }
        let scope = self.scope();
        for (path, alias, glob) in imports {
            if glob {
                let module = self.reader.modules.get_mut(&scope).unwrap();
                module.globs.push((scope.clone(), path.clone()));
                continue;
            }
            // `a::b::{self}` binds `b`.
            let mut written = path.clone();
            if written.last().is_some_and(|s| s == "self") {
                written.pop();
            }
            let name = alias.or_else(|| written.last().cloned());
            if let Some(name) = name.filter(|n| n != "_" && item_level) {
                self.bind(
                    &name,
                    Binding::Import {
                        scope: scope.clone(),
                        path: path.clone(),
                    },
                );
            }
            self.reader.references.push(Reference {
                scope: scope.clone(),
                path,
            });
        }
        j + 1
    }

    /// One use tree at `i` under `prefix`: its imports (path, alias, glob) into `out`.
    fn use_tree(
        &self,
        mut i: usize,
        prefix: Vec<String>,
        out: &mut Vec<(Vec<String>, Option<String>, bool)>,
    ) -> usize {
        let mut path = prefix;
        loop {
            match self.toks.get(i) {
                Some(Token::Ident(w)) => {
                    path.push(w.clone());
                    i += 1;
                    if self.toks.get(i) == Some(&Token::PathSep) {
                        i += 1;
                        continue;
                    }
                    let mut alias = None;
                    if self.ident(i) == Some("as") {
                        alias = self.ident(i + 1).map(str::to_owned);
                        i += 2;
                    }
                    out.push((path, alias, false));
                    return i;
                }
                Some(Token::Punct('*')) => {
                    out.push((path, None, true));
                    return i + 1;
                }
                Some(Token::Punct('{')) => {
                    i += 1;
                    loop {
                        if self.punct(i, '}') {
                            return i + 1;
                        }
                        if i >= self.toks.len() {
                            return i;
                        }
                        i = self.use_tree(i, path.clone(), out);
                        if self.punct(i, ',') {
                            i += 1;
                        }
                    }
                }
                _ => return i,
            }
        }
    }
}

/// The strongly connected components of more than one file (Tarjan's algorithm), each sorted.
fn circles(uses: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<Vec<String>> {
    struct State<'a> {
        uses: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.uses.get(v).into_iter().flat_map(|t| t.keys()) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        uses,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in uses.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found.sort();
    s.found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate written into a temporary folder: (path, source) pairs.
    fn crate_of(files: &[(&str, &str)]) -> (tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        for (path, source) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, source).unwrap();
        }
        let layout = Layout::read(dir.path(), "src/lib.rs");
        (dir, layout)
    }

    fn keys(layout: &Layout) -> Vec<String> {
        layout.findings().iter().map(Finding::key).collect()
    }

    #[test]
    fn a_clean_crate_has_no_findings_and_its_arrows_go_through_re_exports() {
        let (_dir, layout) = crate_of(&[
            (
                "src/lib.rs",
                "mod store;\nmod fmt;\npub use store::Store;\n#[cfg(test)]\nmod tests;\n",
            ),
            (
                "src/fmt.rs",
                "pub(crate) fn human() {}\n\
                 macro_rules! declare { ($t:ty) => { pub(crate) struct Declared($t); } }\n\
                 declare!(u8);\n",
            ),
            (
                "src/tests.rs",
                "use crate::*;\nfn t() { crate::lib_only(); }\n",
            ),
            (
                "src/store/mod.rs",
                "mod error;\nmod azure;\npub use error::Error;\npub use azure::Store;\n",
            ),
            ("src/store/error.rs", "pub struct Error;\n"),
            (
                "src/store/azure.rs",
                "use super::Error;\nuse crate::fmt::{Declared, human};\npub struct Store;\n\
                 fn f() -> Result<(), Error> { human(); Ok(()) }\n\
                 #[cfg(test)]\nmod tests { use super::super::*; fn t() { crate::x::y(); } }\n\
                 #[cfg(all(test, feature = \"daemon\"))]\nmod more { fn t() { crate::x::y(); } }\n\
                 #[cfg(any(test, feature = \"test-util\"))]\nfn f2() { crate::fmt::human(); }\n",
            ),
        ]);
        assert_eq!(keys(&layout), Vec::<String>::new());
        assert!(layout.unresolved.is_empty(), "{:?}", layout.unresolved);
        assert_eq!(
            layout.uses["src/store/azure.rs"].keys().collect::<Vec<_>>(),
            ["src/fmt.rs", "src/store/error.rs"]
        );
        assert!(
            !layout.uses.contains_key("src/tests.rs"),
            "test files are left out"
        );
    }

    /// The proof that the check can fail: a circle, a climb and a long file are each found.
    #[test]
    fn circles_climbs_and_long_files_are_found() {
        let (dir, layout) = crate_of(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod c;\npub(crate) fn helper() {}\n",
            ),
            ("src/a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "src/b.rs",
                "pub struct B;\nfn f() { let _ = crate::c::C; }\n",
            ),
            (
                "src/c.rs",
                "mod inner;\npub struct C;\nfn f() { super::a::A; crate::helper(); }\n",
            ),
            (
                "src/c/inner.rs",
                "use super::C;\nuse crate::c::missing::X;\n",
            ),
        ]);
        assert_eq!(
            keys(&layout),
            [
                "circle src/a.rs src/b.rs src/c.rs",
                "climb src/c.rs -> src/lib.rs",
                "climb src/c/inner.rs -> src/c.rs",
            ]
        );
        assert_eq!(
            layout.unresolved.iter().collect::<Vec<_>>(),
            ["src/c/inner.rs: crate::c::missing::X"]
        );
        let long = long_files(dir.path(), "src", 2);
        assert_eq!(
            long.iter().map(Finding::key).collect::<Vec<_>>(),
            ["long src/c.rs", "long src/lib.rs"]
        );
    }
}
