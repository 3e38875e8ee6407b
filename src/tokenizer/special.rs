//! Splitting special tokens out of the text before the model runs.
//!
//! Control and user-defined tokens are matched leftmost-longest: scanning
//! from the left, the first position where any of them starts wins, and there the longest one.
//! This is Hugging Face's added-token rule (and SentencePiece's for user-defined symbols).
//! llama.cpp instead splits the longest tokens first everywhere; on Gemma's vocabularies the
//! two agree because no two special tokens can overlap (they are runs of one repeated
//! character, or bracketed like `<...>` with no bracket inside). Ollama's Go engine splits in
//! vocabulary-id order, which would cut `\n\n` into two `\n` on Gemma 3; we do not follow it.
//!
//! The tokens are kept in a byte trie, so a scan costs one table lookup per byte that cannot
//! start a token, and at most the longest token's length for one that can.

const NO_NODE: u32 = u32::MAX;

struct Node {
    /// Children sorted by byte.
    edges: Vec<(u8, u32)>,
    /// The token that ends here.
    token: Option<u32>,
}

/// A piece of the input: text for the model, or a special token found whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    Token(u32),
}

pub struct SpecialSplitter {
    nodes: Vec<Node>,
    /// Root children indexed by first byte (NO_NODE where no token starts with it).
    first: Box<[u32; 256]>,
}

impl SpecialSplitter {
    /// Build from (id, text) pairs. Empty texts are ignored; a text listed twice keeps its first id.
    pub fn new<S: AsRef<str>>(tokens: impl IntoIterator<Item = (u32, S)>) -> SpecialSplitter {
        let mut s = SpecialSplitter { nodes: Vec::new(), first: Box::new([NO_NODE; 256]) };
        for (id, text) in tokens {
            let Some((&b0, rest)) = text.as_ref().as_bytes().split_first() else { continue };
            let mut node = match s.first[b0 as usize] {
                NO_NODE => {
                    let n = s.push_node();
                    s.first[b0 as usize] = n;
                    n
                }
                n => n,
            };
            for &b in rest {
                node = match s.child(node, b) {
                    Some(c) => c,
                    None => {
                        let c = s.push_node();
                        let edges = &mut s.nodes[node as usize].edges;
                        let at = edges.partition_point(|&(e, _)| e < b);
                        edges.insert(at, (b, c));
                        c
                    }
                };
            }
            s.nodes[node as usize].token.get_or_insert(id);
        }
        s
    }

    fn push_node(&mut self) -> u32 {
        self.nodes.push(Node { edges: Vec::new(), token: None });
        (self.nodes.len() - 1) as u32
    }

    fn child(&self, node: u32, b: u8) -> Option<u32> {
        let edges = &self.nodes[node as usize].edges;
        edges.binary_search_by_key(&b, |&(e, _)| e).ok().map(|i| edges[i].1)
    }

    /// The longest token starting at `bytes[0]`: (id, length in bytes).
    fn longest_at(&self, bytes: &[u8]) -> Option<(u32, usize)> {
        let mut node = self.first[*bytes.first()? as usize];
        if node == NO_NODE {
            return None;
        }
        let mut best = None;
        for (i, &b) in bytes.iter().enumerate() {
            if i > 0 {
                match self.child(node, b) {
                    Some(c) => node = c,
                    None => break,
                }
            }
            if let Some(id) = self.nodes[node as usize].token {
                best = Some((id, i + 1));
            }
        }
        best
    }

    /// Split `text` into special tokens and the text between them (never empty), in order.
    pub fn split<'a>(&self, text: &'a str, out: &mut Vec<Piece<'a>>) {
        let bytes = text.as_bytes();
        let (mut start, mut i) = (0, 0);
        while i < bytes.len() {
            match self.longest_at(&bytes[i..]) {
                // Tokens are whole UTF-8 strings, so a match starts and ends on char boundaries.
                Some((id, len)) => {
                    if start < i {
                        out.push(Piece::Text(&text[start..i]));
                    }
                    out.push(Piece::Token(id));
                    i += len;
                    start = i;
                }
                None => i += 1,
            }
        }
        if start < bytes.len() {
            out.push(Piece::Text(&text[start..]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split<'a>(s: &SpecialSplitter, text: &'a str) -> Vec<Piece<'a>> {
        let mut out = Vec::new();
        s.split(text, &mut out);
        out
    }

    #[test]
    fn leftmost_then_longest() {
        let s = SpecialSplitter::new([(1, "\n"), (2, "\n\n"), (3, "<b>"), (4, "<bos>"), (5, "ab"), (6, "bc")]);
        use Piece::*;
        assert_eq!(split(&s, "\n\n\n"), [Token(2), Token(1)]);
        assert_eq!(split(&s, "x<bos>y<b>"), [Text("x"), Token(4), Text("y"), Token(3)]);
        // Overlapping candidates: the one starting first wins even though another is as long.
        assert_eq!(split(&s, "abc"), [Token(5), Text("c")]);
        assert_eq!(split(&s, "<bo"), [Text("<bo")]);
        assert_eq!(split(&s, ""), []);
        assert_eq!(split(&s, "é<b>é"), [Text("é"), Token(3), Text("é")]);
    }

    #[test]
    fn duplicate_text_keeps_first_id() {
        let s = SpecialSplitter::new([(7, "<x>"), (9, "<x>"), (8, "")]);
        assert_eq!(split(&s, "<x>"), [Piece::Token(7)]);
    }
}
