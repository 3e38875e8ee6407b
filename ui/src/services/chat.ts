import { Channel } from '@tauri-apps/api/core';
import type {
  Chat,
  ChatSummary,
  ExportFormat,
  Id,
  Sampling,
  SearchHit,
  StreamEvent,
} from '../types';
import { call } from './ipc';

export const listChats = () => call<ChatSummary[]>('list_chats');

export const createChat = (model?: string | null) =>
  call<ChatSummary>('create_chat', { model: model ?? null });

export const getChat = (id: Id) => call<Chat>('get_chat', { id });

export const renameChat = (id: Id, title: string) => call<void>('rename_chat', { id, title });

export const deleteChat = (id: Id) => call<void>('delete_chat', { id });

export const pinChat = (id: Id, pinned: boolean) => call<void>('pin_chat', { id, pinned });

export const searchChats = (query: string) => call<SearchHit[]>('search_chats', { query });

export const updateChatSettings = (id: Id, systemPrompt: string, sampling: Sampling) =>
  call<void>('update_chat_settings', { id, systemPrompt, sampling });

export type StreamHandler = (event: StreamEvent) => void;

function streamChannel(onEvent: StreamHandler): Channel<StreamEvent> {
  const channel = new Channel<StreamEvent>();
  channel.onmessage = onEvent;
  return channel;
}

/** Appends a user message under `parentId` (null: a first message) and streams the reply. */
export const sendMessage = (
  chatId: Id,
  content: string,
  parentId: Id | null,
  thinking: boolean,
  onEvent: StreamHandler,
) =>
  call<number>('send_message', {
    chatId,
    content,
    parentId,
    thinking,
    onEvent: streamChannel(onEvent),
  });

/** Streams a new sibling of the assistant message `messageId`. */
export const regenerate = (chatId: Id, messageId: Id, thinking: boolean, onEvent: StreamHandler) =>
  call<number>('regenerate', { chatId, messageId, thinking, onEvent: streamChannel(onEvent) });

/** Adds a sibling of the user message `messageId` with new content, and streams its reply. */
export const editMessage = (
  chatId: Id,
  messageId: Id,
  content: string,
  thinking: boolean,
  onEvent: StreamHandler,
) =>
  call<number>('edit_message', {
    chatId,
    messageId,
    content,
    thinking,
    onEvent: streamChannel(onEvent),
  });

export const stopGeneration = () => call<void>('stop_generation');

export const exportChat = (id: Id, format: ExportFormat) =>
  call<string>('export_chat', { id, format });

export const exportAll = (format: ExportFormat) => call<string>('export_all', { format });

/** Returns how many chats were imported. */
export const importChats = (json: string) => call<number>('import_chats', { json });

/** Save text where the person chooses (native dialog; the webview drops `<a download>`).
 * Resolves to the saved path, or null when cancelled. */
export const saveTextFile = (suggestedName: string, content: string) =>
  call<string | null>('save_text_file', { suggestedName, content });
