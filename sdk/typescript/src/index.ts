// @hutch/sdk: the TypeScript SDK of hutch, the self-hosted sandbox daemon (`hutch serve`).
//
//   import { Sandbox } from '@hutch/sdk';
//   await using sb = await Sandbox.create();
//   console.log((await sb.commands.run("python3 -c 'print(1+1)'")).stdout);
export { Hutch, Keys, Pools, type HutchOptions, type KeyCreateOptions, type PoolCreateOptions } from './client.js';
export {
  Commands,
  Context,
  Contexts,
  Files,
  Process,
  Sandbox,
  type CodeRunOptions,
  type Command,
  type CommandOptions,
  type RunOptions,
  type SandboxCreateOptions,
  type SandboxListOptions,
} from './sandbox.js';
export type { ResultCallback, TextCallback } from './streams.js';
export {
  AuthenticationError,
  BackendUnavailableError,
  CapacityError,
  ConflictError,
  DaemonUnavailableError,
  HutchError,
  InvalidRequestError,
  NotFoundError,
  NotSupportedError,
  PermissionDeniedError,
  RateLimitError,
  SandboxStoppedError,
  ServerError,
} from './errors.js';
export {
  CommandResult,
  Execution,
  Result,
  type ContextInfo,
  type Entry,
  type ExecutionError,
  type FileInfo,
  type FileKind,
  type Key,
  type Language,
  type Limits,
  type PhaseTimings,
  type PoolInfo,
  type PoolTemplate,
  type ProcessInfo,
  type Reuse,
  type SandboxInfo,
  type SandboxState,
  type StreamEvent,
  type VersionInfo,
} from './models.js';
export { DEFAULT_URL } from './endpoint.js';
export { buildRequest, decodeResponse, encodeBody, OPERATIONS, Transport, type HttpRequest, type HttpResponse, type TransportOptions } from './transport.js';
export { VERSION } from './version.js';
