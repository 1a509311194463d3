import { join } from 'node:path';
import type { OsUser } from '../os-user.js';
import type { StackPaths } from '../paths.js';
import { instancePortMap, type PortMap, type PortName, portBase } from '../ports.js';
import { type Profile, REPLICAS } from '../profile.js';
import type { StackSecrets } from '../secrets.js';
import type { LaunchSpec } from '../supervisor.js';

export const SERVER_NAMES = [
  'postgres',
  'redis',
  'ejabberd',
  'livekit',
  'minio',
  'ai',
  'proxy',
  'control-plane',
] as const;
export type ServerName = (typeof SERVER_NAMES)[number];

/** One of a replicated server's instances: "a" at index 0, with its own block of ports. */
export interface Instance {
  name: string;
  index: number;
  ports: PortMap;
}

/** The instances of a replicated server in a profile (none in a single-node profile). */
export function instancesOf(profile: Profile): Instance[] {
  const base = portBase(profile);
  return REPLICAS[profile].map((name, index) => ({ name, index, ports: instancePortMap(base, index) }));
}

/** Everything a server module needs to know about the profile it runs in. */
export interface StackContext {
  profile: Profile;
  paths: StackPaths;
  /** Where clients and the other servers reach each server: in a clustered profile, the proxy's. */
  ports: PortMap;
  secrets: StackSecrets;
  /** Set while the runner acts on one instance of a replicated server. */
  instance?: Instance;
}

/** The ports a server listens on itself: its instance's, or the profile's. */
export function ownPorts(context: StackContext): PortMap {
  return context.instance?.ports ?? context.ports;
}

/** What the runner calls a running process (run record, log file): ejabberd, or ejabberd-a. */
export function unitName(server: ServerName, instance?: string): string {
  return instance === undefined ? server : `${server}-${instance}`;
}

/** A server built from source with `go install <module>@<version>` into .stack/bin. */
export interface GoBinary {
  /** The file name in .stack/bin. */
  name: string;
  module: string;
  version: string;
  /** The file name go install writes (the package directory's name). */
  builtName: string;
}

/** A tool built by a shell script of ours (`sh <script> <output file>`) into .stack/bin. */
export interface ScriptBuild {
  /** The file name in .stack/bin. */
  name: string;
  script: string;
  /** How long a cold build takes, for the message while it runs. */
  takes: string;
}

/**
 * A server run from a Python virtual environment in .stack/bin: wheels only, from PyPI, pinned in a
 * requirements file; `noDeps` are installed after them without their declared dependencies.
 */
export interface PythonEnv {
  /** The environment's directory name in .stack/bin. */
  name: string;
  requirements: string;
  noDeps: readonly string[];
}

/**
 * One server of the stack. The runner does the rest the same way for all of them: install,
 * port check, detached start with a log file and run record, health wait, stop.
 */
export interface ServerDefinition {
  name: ServerName;
  /** Debian packages that provide it. */
  aptPackages: readonly string[];
  goBinary?: GoBinary;
  /** A tool it runs, built from source by a script of ours. */
  scriptBuild?: ScriptBuild;
  pythonEnv?: PythonEnv;
  /** The OS account it runs as when the runner is root. */
  osUser?: string;
  /** Its graceful-stop signal. */
  stopSignal: NodeJS.Signals;
  /** How long a stop may take before the process is killed (default STOP_TIMEOUT_MS, 15 s). */
  stopTimeoutMs?: number;
  ports: readonly PortName[];
  /** Runs as one instance per REPLICAS entry in a clustered profile. */
  replicated?: boolean;
  /** Runs only in a clustered profile (the proxy). */
  clusterOnly?: boolean;
  /** Where clients reach it, for status and banners. */
  url(context: StackContext): string;
  /** Creates its data dirs and renders its config; runs before every start. */
  prepare(context: StackContext, user: OsUser | undefined): Promise<void>;
  launch(context: StackContext): LaunchSpec;
  isHealthy(context: StackContext): Promise<boolean>;
  /** Idempotent setup that needs it running (roles, databases); runs on every `up`, started or reused. */
  afterHealthy?(context: StackContext): Promise<void>;
}

/** A server's data dir: data/<server> in its profile, data/<server>-<instance> for an instance. */
export function dataDirOf(context: StackContext, server: ServerName): string {
  return join(context.paths.dataDir, unitName(server, context.instance?.name));
}

/** A rendered config file of a server: conf/<file>, or conf/<instance>/<file> for an instance. */
export function confFileOf(context: StackContext, file: string): string {
  const { confDir } = context.paths;
  return context.instance === undefined ? join(confDir, file) : join(confDir, context.instance.name, file);
}
