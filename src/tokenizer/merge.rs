//! The merge loop shared by BPE and SentencePiece-BPE.
//!
//! A word starts as one symbol per character. Every adjacent pair that may merge gets a
//! priority; the best pair (ties: leftmost) is merged, the pairs it forms with its neighbours
//! are queued, and queued pairs whose symbols have changed since are skipped when popped.
//! The two algorithms differ only in which pairs may merge and how they rank, which the
//! caller supplies. Symbols left at the end whose text is not a token fall back to bytes.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::vocab::Vocab;

const NONE: usize = usize::MAX;

/// A piece of the word: a byte range of it, and its token id (None: a character the
/// vocabulary lacks).
#[derive(Debug, Clone, Copy)]
pub struct Symbol {
    pub start: usize,
    pub end: usize,
    pub id: Option<u32>,
    prev: usize,
    next: usize,
}

struct Candidate<P> {
    priority: P,
    left: usize,
    right: usize,
    /// Byte length of the merged text, to detect pairs that went stale.
    len: usize,
    merged: u32,
}

impl<P: Ord> Ord for Candidate<P> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Max-heap: higher priority first, then the leftmost pair.
        self.priority.cmp(&other.priority).then(Reverse(self.left).cmp(&Reverse(other.left)))
    }
}
impl<P: Ord> PartialOrd for Candidate<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<P: Ord> PartialEq for Candidate<P> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<P: Ord> Eq for Candidate<P> {}

/// Encode one word (already normalized) into `out`.
///
/// `pair(word, left, right)` says whether two adjacent symbols may merge: the priority
/// (greater merges first) and the id of the merged token.
pub fn merge_word<P: Ord>(
    vocab: &Vocab,
    unk: Option<u32>,
    word: &str,
    pair: impl Fn(&str, &Symbol, &Symbol) -> Option<(P, u32)>,
    out: &mut Vec<u32>,
) {
    let mut syms: Vec<Symbol> = Vec::with_capacity(word.len());
    for (start, c) in word.char_indices() {
        let end = start + c.len_utf8();
        let prev = syms.len().checked_sub(1).unwrap_or(NONE);
        syms.push(Symbol { start, end, id: vocab.id(&word[start..end]), prev, next: syms.len() + 1 });
    }
    if let Some(last) = syms.last_mut() {
        last.next = NONE;
    }

    let mut queue = BinaryHeap::new();
    let try_pair = |syms: &[Symbol], queue: &mut BinaryHeap<Candidate<P>>, left: usize, right: usize| {
        if left == NONE || right == NONE {
            return;
        }
        let (l, r) = (&syms[left], &syms[right]);
        if let Some((priority, merged)) = pair(word, l, r) {
            queue.push(Candidate { priority, left, right, len: r.end - l.start, merged });
        }
    };
    for i in 1..syms.len() {
        try_pair(&syms, &mut queue, i - 1, i);
    }

    while let Some(c) = queue.pop() {
        let (l, r) = (syms[c.left], syms[c.right]);
        // A merged-away symbol has start == end; a grown one no longer spans `len`.
        if l.start == l.end || r.start == r.end || l.next != c.right || r.end - l.start != c.len {
            continue;
        }
        syms[c.left] = Symbol { end: r.end, id: Some(c.merged), next: r.next, ..l };
        syms[c.right].end = syms[c.right].start;
        if r.next != NONE {
            syms[r.next].prev = c.left;
        }
        try_pair(&syms, &mut queue, l.prev, c.left);
        try_pair(&syms, &mut queue, c.left, r.next);
    }

    let mut i = if syms.is_empty() { NONE } else { 0 };
    while i != NONE {
        let s = &syms[i];
        match s.id {
            Some(id) => out.push(id),
            None => vocab.push_bytes(&word[s.start..s.end], unk, out),
        }
        i = s.next;
    }
}
