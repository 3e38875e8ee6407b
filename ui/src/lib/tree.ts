// A chat is a tree: editing a user message or regenerating a reply adds a sibling, so every
// version is kept. The view shows one root-to-leaf path, chosen per fork by `Selection`.
import type { Id, Message } from '../types';

/** For each parent (by key), the child the user has chosen to follow. */
export type Selection = Readonly<Record<string, string>>;

const ROOT_KEY = '\u0000root';

export const keyOf = (id: Id | null | undefined): string =>
  id === null || id === undefined ? ROOT_KEY : String(id);

export interface MessageTree {
  byId: Map<string, Message>;
  /** Children in creation order, keyed by the parent's key (roots under ROOT_KEY). */
  children: Map<string, Message[]>;
}

export function buildTree(messages: readonly Message[]): MessageTree {
  const byId = new Map<string, Message>();
  const children = new Map<string, Message[]>();
  for (const m of messages) byId.set(keyOf(m.id), m);
  for (const m of messages) {
    // A parent that is not in the list (should not happen) makes the message a root rather
    // than hiding it.
    const parent = m.parent_id !== null && byId.has(keyOf(m.parent_id)) ? keyOf(m.parent_id) : ROOT_KEY;
    const list = children.get(parent) ?? [];
    list.push(m);
    children.set(parent, list);
  }
  // Stable sort keeps the database order for equal timestamps.
  for (const list of children.values()) list.sort((a, b) => a.created - b.created);
  return { byId, children };
}

/** The path shown: at each fork the selected child, else the newest one. */
export function activePath(tree: MessageTree, selection: Selection): Message[] {
  const path: Message[] = [];
  const seen = new Set<string>();
  let key = ROOT_KEY;
  for (;;) {
    const kids = tree.children.get(key);
    if (!kids || kids.length === 0) return path;
    const chosen = kids.find((m) => keyOf(m.id) === selection[key]) ?? kids[kids.length - 1];
    key = keyOf(chosen.id);
    if (seen.has(key)) return path; // a cycle in bad data must not hang the view
    seen.add(key);
    path.push(chosen);
  }
}

export function siblingsOf(tree: MessageTree, message: Message): Message[] {
  const parent = message.parent_id !== null && tree.byId.has(keyOf(message.parent_id))
    ? keyOf(message.parent_id)
    : ROOT_KEY;
  return tree.children.get(parent) ?? [message];
}

/** Follow `message` at its fork. */
export function selectBranch(selection: Selection, message: Pick<Message, 'id' | 'parent_id'>): Selection {
  return { ...selection, [keyOf(message.parent_id)]: keyOf(message.id) };
}

/** Make the path run through message `id` (e.g. a search hit in an older branch). */
export function selectPathTo(tree: MessageTree, selection: Selection, id: Id): Selection {
  const next: Record<string, string> = { ...selection };
  let current = tree.byId.get(keyOf(id));
  const seen = new Set<string>();
  while (current && !seen.has(keyOf(current.id))) {
    seen.add(keyOf(current.id));
    const parent = current.parent_id !== null && tree.byId.has(keyOf(current.parent_id))
      ? keyOf(current.parent_id)
      : ROOT_KEY;
    next[parent] = keyOf(current.id);
    current = current.parent_id === null ? undefined : tree.byId.get(keyOf(current.parent_id));
  }
  return next;
}
