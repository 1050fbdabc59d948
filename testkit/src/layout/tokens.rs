//! Rust source as the layout check reads it: identifiers, `::` and punctuation, with comments,
//! string and character literals, lifetimes and numbers left out. Enough to find module
//! declarations, items, `use` trees and paths; not a Rust parser.

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// An identifier or keyword (`r#name` as `name`).
    Ident(String),
    /// `::`.
    PathSep,
    /// Any other punctuation character.
    Punct(char),
}

/// The tokens of `source`.
pub fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            i = skip_block_comment(&chars, i);
        } else if c == '"' {
            i = skip_string(&chars, i + 1);
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i);
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if is_ident_start(c) {
            let start = i;
            while i < chars.len() && is_ident_continue(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            if raw && (at(i) == '"' || (at(i) == '#' && raw_string_follows(&chars, i))) {
                i = skip_raw_string(&chars, i);
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                i = skip_string(&chars, i + 1);
            } else if word == "b" && at(i) == '\'' {
                i = skip_char_or_lifetime(&chars, i);
            } else if word == "r" && at(i) == '#' && is_ident_start(at(i + 1)) {
                let start = i + 1;
                i = start;
                while i < chars.len() && is_ident_continue(chars[i]) {
                    i += 1;
                }
                out.push(Token::Ident(chars[start..i].iter().collect()));
            } else {
                out.push(Token::Ident(word));
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push(Token::PathSep);
            i += 2;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Past a `/* */` comment starting at `i` (they nest).
fn skip_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// Past the closing quote of a string whose body starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Whether `#...#"` starts at `i` (a raw string's hashes).
fn raw_string_follows(chars: &[char], mut i: usize) -> bool {
    while chars.get(i) == Some(&'#') {
        i += 1;
    }
    chars.get(i) == Some(&'"')
}

/// Past a raw string whose hashes (or opening quote) start at `i`.
fn skip_raw_string(chars: &[char], mut i: usize) -> usize {
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// Past a character literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`) at `i`.
fn skip_char_or_lifetime(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        let mut j = i + 3;
        while j < chars.len() && chars[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    let mut j = i + 1;
    while j < chars.len() && is_ident_continue(chars[j]) {
        j += 1;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(source: &str) -> Vec<String> {
        tokens(source)
            .into_iter()
            .map(|t| match t {
                Token::Ident(w) => w,
                Token::PathSep => "::".to_owned(),
                Token::Punct(c) => c.to_string(),
            })
            .collect()
    }

    #[test]
    fn comments_literals_and_lifetimes_are_left_out() {
        let source = r##"
            // use crate::a;
            /* use crate::b; /* nested */ */
            fn f<'a>(x: &'a str) -> char {
                let _ = "use crate::c; \" still";
                let _ = r#"use crate::d; "quoted""#;
                let _ = b"crate::e";
                let _ = (b'x', '\'', '{', '\u{7b}', 1_000u32, 0x1f);
                crate::g::h(r#type)
            }
        "##;
        let w = words(source);
        let text = w.join(" ");
        assert!(!text.contains("a ;") && !text.contains("b ;") && !text.contains(" c "));
        assert!(!text.contains(" d ") && !text.contains(" e"));
        assert!(text.contains("crate :: g :: h ( type )"), "{text}");
        assert_eq!(w.iter().filter(|t| *t == "{").count(), 1, "{text}");
    }
}
