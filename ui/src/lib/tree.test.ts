import { describe, expect, it } from 'vitest';
import { message } from '../../test/fakeBackend';
import { activePath, buildTree, selectBranch, selectPathTo, siblingsOf } from './tree';

// 1 user → 2 reply, 3 reply (regenerated); 3 → 4 user → 5 reply; 6 user: an edit of 1.
const messages = [
  message(1, null, 'user', 'q1'),
  message(2, 1, 'assistant', 'a1'),
  message(3, 1, 'assistant', 'a1 again'),
  message(4, 3, 'user', 'q2'),
  message(5, 4, 'assistant', 'a2'),
  message(6, null, 'user', 'q1 edited'),
];
const ids = (path: { id: unknown }[]) => path.map((m) => m.id);

describe('message tree', () => {
  it('follows the newest child at every fork by default', () => {
    expect(ids(activePath(buildTree(messages), {}))).toEqual([6]);
  });

  it('follows the chosen branch where one was selected', () => {
    const tree = buildTree(messages);
    let sel = selectBranch({}, messages[0]);
    expect(ids(activePath(tree, sel))).toEqual([1, 3, 4, 5]);
    sel = selectBranch(sel, messages[1]);
    expect(ids(activePath(tree, sel))).toEqual([1, 2]);
  });

  it('lists siblings in creation order, roots included', () => {
    const tree = buildTree(messages);
    expect(ids(siblingsOf(tree, messages[2]))).toEqual([2, 3]);
    expect(ids(siblingsOf(tree, messages[5]))).toEqual([1, 6]);
    expect(ids(siblingsOf(tree, messages[4]))).toEqual([5]);
  });

  it('selects the whole path to a message deep in an older branch', () => {
    const tree = buildTree(messages);
    expect(ids(activePath(tree, selectPathTo(tree, {}, 5)))).toEqual([1, 3, 4, 5]);
    expect(ids(activePath(tree, selectPathTo(tree, {}, 2)))).toEqual([1, 2]);
  });

  it('orders by created time, not by list order', () => {
    const shuffled = [message(11, null, 'user', 'x'), message(13, 11, 'assistant', 'late', { created: 50 }), message(12, 11, 'assistant', 'early', { created: 10 })];
    const tree = buildTree(shuffled);
    expect(ids(siblingsOf(tree, shuffled[1]))).toEqual([12, 13]);
    expect(ids(activePath(tree, {}))).toEqual([11, 13]);
  });

  it('survives a cycle and a missing parent in bad data', () => {
    const bad = [message(1, 2, 'user', 'a'), message(2, 1, 'assistant', 'b'), message(3, 99, 'user', 'orphan')];
    expect(ids(activePath(buildTree(bad), {}))).toEqual([3]);
  });
});
