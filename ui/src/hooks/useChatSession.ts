// One open chat: its message tree, which branch is shown, and the reply being streamed.
//
// Streaming writes into local state as events arrive (the backend saves the same tokens as
// they stream); when the stream ends the chat is read back so the view shows exactly what
// was stored.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import * as chats from '../services/chat';
import { humanError } from '../lib/errors';
import {
  activePath,
  buildTree,
  keyOf,
  selectBranch,
  selectPathTo,
  type Selection,
} from '../lib/tree';
import type { Chat, GenerationStats, Id, Message, StreamEvent } from '../types';
import { useNotices } from './useNotices';

export interface StreamState {
  chatId: Id;
  assistantId: Id;
  stopping: boolean;
}

const PENDING_USER = 'pending:user';
const PENDING_ASSISTANT = 'pending:assistant';

type Starter = (onEvent: chats.StreamHandler) => Promise<number>;

function placeholder(id: Id, parent: Id | null, role: Message['role'], content: string, model: string | null = null): Message {
  return {
    id,
    parent_id: parent,
    role,
    content,
    thinking: role === 'assistant' ? '' : null,
    status: role === 'assistant' ? 'streaming' : 'complete',
    model,
    prompt_tokens: null,
    reply_tokens: null,
    tok_s: null,
    created: Date.now() / 1000,
  };
}

const sameId = (a: Id | null | undefined, b: Id | null | undefined) => keyOf(a) === keyOf(b);

function patchMessage(chat: Chat, id: Id, patch: (m: Message) => Message): Chat {
  return { ...chat, messages: chat.messages.map((m) => (sameId(m.id, id) ? patch(m) : m)) };
}

export interface ChatSessionOptions {
  /** Called when the backend's copy of the chat list changed (new chat, new message). */
  onChanged: () => void;
  /** Called when `send` had to create a chat first. */
  onCreated: (id: Id) => void;
}

/** `highlight`: a message to bring into view (a search hit); the path is switched to it. */
export function useChatSession(chatId: Id | null, highlight: Id | null, options: ChatSessionOptions) {
  const { notify } = useNotices();
  const [chat, setChat] = useState<Chat | null>(null);
  const [selection, setSelection] = useState<Selection>({});
  const [stream, setStream] = useState<StreamState | null>(null);
  const [stats, setStats] = useState<GenerationStats | null>(null);

  // Refs for callbacks that run after awaits or from channel events.
  const chatRef = useRef<Chat | null>(null);
  chatRef.current = chat;
  const streamRef = useRef<StreamState | null>(null);
  streamRef.current = stream;
  const generation = useRef(0);
  // The id tokens are written to. Set by the event handlers themselves, not from render, so a
  // token that arrives right after 'started' finds the renamed message.
  const assistantIdRef = useRef<Id>(PENDING_ASSISTANT);
  const optionsRef = useRef(options);
  optionsRef.current = options;

  const reload = useCallback(
    async (id: Id) => {
      try {
        const fresh = await chats.getChat(id);
        if (sameId(chatRef.current?.id ?? id, id)) setChat(fresh);
        return fresh;
      } catch (e) {
        notify('error', `Couldn't open the chat. ${humanError(e)}`);
        return null;
      }
    },
    [notify],
  );

  // Opening another chat. A reply still streaming into the old one is stopped: it is saved
  // by the backend as it goes, and the user has moved on.
  useEffect(() => {
    if (chatRef.current && chatId !== null && sameId(chatRef.current.id, chatId)) return;
    if (streamRef.current && !sameId(streamRef.current.chatId, chatId)) {
      generation.current += 1;
      streamRef.current = null;
      setStream(null);
      void chats.stopGeneration().catch(() => {});
    }
    setChat(null);
    setSelection({});
    setStats(null);
    chatRef.current = null;
    if (chatId !== null) void reload(chatId);
  }, [chatId, reload]);

  const tree = useMemo(() => buildTree(chat?.messages ?? []), [chat]);
  const path = useMemo(() => activePath(tree, selection), [tree, selection]);

  // A search hit in an older branch: switch the path to run through it.
  // Applied once per hit, so switching branches afterwards is not undone.
  const appliedHighlight = useRef<string | null>(null);
  useEffect(() => {
    if (highlight === null) appliedHighlight.current = null;
    if (highlight === null || !chat) return;
    const key = `${keyOf(chat.id)}|${keyOf(highlight)}`;
    if (appliedHighlight.current === key || !tree.byId.has(keyOf(highlight))) return;
    appliedHighlight.current = key;
    setSelection((s) => selectPathTo(tree, s, highlight));
  }, [highlight, chat, tree]);

  const finish = useCallback(
    async (token: number, chatIdOfStream: Id) => {
      if (token !== generation.current) return;
      setStream(null);
      await reload(chatIdOfStream);
      optionsRef.current.onChanged();
    },
    [reload],
  );

  const handleEvent = useCallback(
    (token: number, chatIdOfStream: Id, event: StreamEvent) => {
      if (token !== generation.current) return; // a stream the user has left
      switch (event.type) {
        case 'started': {
          const { user_message_id: userId, assistant_message_id: assistantId } = event;
          setChat((c) => {
            if (!c) return c;
            let messages = c.messages.map((m) => {
              if (sameId(m.id, PENDING_USER)) return { ...m, id: userId };
              if (sameId(m.id, PENDING_ASSISTANT)) return { ...m, id: assistantId, parent_id: userId };
              return m;
            });
            if (!messages.some((m) => sameId(m.id, assistantId))) {
              messages = [...messages, placeholder(assistantId, userId, 'assistant', '')];
            }
            return { ...c, messages };
          });
          setSelection((s) => {
            const user = chatRef.current?.messages.find(
              (m) => sameId(m.id, userId) || sameId(m.id, PENDING_USER),
            );
            const withUser = user ? selectBranch(s, { id: userId, parent_id: user.parent_id }) : s;
            return selectBranch(withUser, { id: assistantId, parent_id: userId });
          });
          assistantIdRef.current = assistantId;
          setStream((st) => (st ? { ...st, assistantId } : st));
          return;
        }
        case 'token': {
          const id = assistantIdRef.current;
          setChat((c) =>
            c
              ? patchMessage(c, id, (m) =>
                  event.thinking
                    ? { ...m, thinking: (m.thinking ?? '') + event.text }
                    : { ...m, content: m.content + event.text },
                )
              : c,
          );
          return;
        }
        case 'stats': {
          const { type: _type, ...s } = event;
          setStats(s);
          return;
        }
        case 'done': {
          if (event.stop_reason === 'context_full') {
            notify('info', 'The reply stopped because the context is full. Start a new chat or raise the context length in Settings.');
          }
          void finish(token, chatIdOfStream);
          return;
        }
        case 'error': {
          notify('error', humanError(event.message));
          const id = assistantIdRef.current;
          setChat((c) => (c ? patchMessage(c, id, (m) => ({ ...m, status: 'error' })) : c));
          void finish(token, chatIdOfStream);
          return;
        }
      }
    },
    [finish, notify],
  );

  /** Shows `optimistic` messages at once and streams into them. */
  const run = useCallback(
    async (target: Chat, optimistic: Message[], select: (s: Selection) => Selection, start: Starter) => {
      if (streamRef.current) return false;
      const token = ++generation.current;
      const assistant = optimistic.find((m) => m.role === 'assistant');
      const state: StreamState = { chatId: target.id, assistantId: assistant?.id ?? PENDING_ASSISTANT, stopping: false };
      streamRef.current = state;
      assistantIdRef.current = state.assistantId;
      setStream(state);
      setStats(null);
      setChat((c) => (c && sameId(c.id, target.id) ? { ...c, messages: [...c.messages, ...optimistic] } : c));
      setSelection(select);
      try {
        await start((event) => handleEvent(token, target.id, event));
      } catch (e) {
        if (token === generation.current) {
          notify('error', humanError(e));
          void finish(token, target.id);
        }
        return false;
      }
      return true;
    },
    [finish, handleEvent, notify],
  );

  const ensureChat = useCallback(
    async (model: string | null): Promise<Chat | null> => {
      if (chatRef.current) return chatRef.current;
      try {
        const summary = await chats.createChat(model);
        const fresh = await chats.getChat(summary.id);
        chatRef.current = fresh;
        setChat(fresh);
        setSelection({});
        optionsRef.current.onCreated(fresh.id);
        optionsRef.current.onChanged();
        return fresh;
      } catch (e) {
        notify('error', `Couldn't start a chat. ${humanError(e)}`);
        return null;
      }
    },
    [notify],
  );

  const send = useCallback(
    async (content: string, thinking: boolean, model: string | null) => {
      if (streamRef.current) return false;
      const target = await ensureChat(model);
      if (!target) return false;
      // `path` belongs to the chat in state; a chat created just now has none.
      const parent = path.length > 0 ? path[path.length - 1].id : null;
      const user = placeholder(PENDING_USER, parent, 'user', content);
      const assistant = placeholder(PENDING_ASSISTANT, PENDING_USER, 'assistant', '', model);
      return run(
        target,
        [user, assistant],
        (s) => selectBranch(selectBranch(s, user), assistant),
        (onEvent) => chats.sendMessage(target.id, content, parent, thinking, onEvent),
      );
    },
    [ensureChat, path, run],
  );

  const regenerate = useCallback(
    async (message: Message, thinking: boolean, model: string | null = null) => {
      const target = chatRef.current;
      if (!target || message.role !== 'assistant') return false;
      const assistant = placeholder(PENDING_ASSISTANT, message.parent_id, 'assistant', '', model);
      return run(
        target,
        [assistant],
        (s) => selectBranch(s, assistant),
        (onEvent) => chats.regenerate(target.id, message.id, thinking, onEvent),
      );
    },
    [run],
  );

  const edit = useCallback(
    async (message: Message, content: string, thinking: boolean, model: string | null = null) => {
      const target = chatRef.current;
      if (!target || message.role !== 'user') return false;
      const user = placeholder(PENDING_USER, message.parent_id, 'user', content);
      const assistant = placeholder(PENDING_ASSISTANT, PENDING_USER, 'assistant', '', model);
      return run(
        target,
        [user, assistant],
        (s) => selectBranch(selectBranch(s, user), assistant),
        (onEvent) => chats.editMessage(target.id, message.id, content, thinking, onEvent),
      );
    },
    [run],
  );

  const stop = useCallback(async () => {
    const current = streamRef.current;
    if (!current || current.stopping) return;
    setStream({ ...current, stopping: true });
    try {
      await chats.stopGeneration();
    } catch (e) {
      notify('error', humanError(e));
    }
  }, [notify]);

  const showBranch = useCallback((message: Message) => {
    setSelection((s) => selectBranch(s, message));
  }, []);

  const reloadCurrent = useCallback(async () => {
    if (chatRef.current) await reload(chatRef.current.id);
  }, [reload]);

  return {
    chat,
    tree,
    path,
    stream,
    stats,
    send,
    regenerate,
    edit,
    stop,
    showBranch,
    reload: reloadCurrent,
  };
}

export type ChatSession = ReturnType<typeof useChatSession>;
