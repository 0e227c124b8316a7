/**
 * deploy/Dockerfile without a container runtime: its final stage's filesystem is built into a
 * directory by the Dockerfile's own steps, and the service is run from it as the image would run
 * it (its user, environment, working directory, command and health check), then a hosted job.
 *
 * How each instruction is reproduced is listed in STEPS below; an instruction no step matches fails
 * the test, and so does a step that matches nothing, so the two stay in step. The commands that
 * make the image's files (`node scripts/pack.mjs …`, `scripts/install-server.sh …`, `mkdir … &&
 * chown …`) run as the Dockerfile writes them, with its absolute paths moved under the directory.
 * What the base images and apt-get provide is this machine's: the same Debian release and Node
 * major (both asserted), the apt packages (asserted installed). Two differences make the check
 * stricter, not weaker: the server runs with a PATH that has no ffmpeg (the native engine must not
 * need one), and on loopback (HOST=0.0.0.0 would listen on every interface).
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../global-setup.js';
import { runNode } from '../helpers/cli.js';
import { hostedSmokeJob } from '../helpers/hosted-smoke.js';
import { startRegistry, type TestRegistry } from '../helpers/registry.js';
import { removeServerDirs, startServer } from '../helpers/server.js';

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  image: string;
  name?: string;
  instructions: Instruction[];
}

/** Stages and their instructions: comments dropped, continuation lines joined, ARGs substituted in FROM. */
function parseDockerfile(text: string): { args: Record<string, string>; stages: Stage[] } {
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  const logical = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const line of logical) {
    const [, keyword = '', rest = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const instruction = { keyword: keyword.toUpperCase(), args: rest.replace(/\s+/g, ' ') };
    if (instruction.keyword === 'ARG' && stages.length === 0) {
      const [name = '', value = ''] = instruction.args.split('=');
      args[name] = value;
    } else if (instruction.keyword === 'FROM') {
      const [image = '', , name] = instruction.args
        .replace(/\$\{(\w+)\}/g, (_, v) => args[v] ?? '')
        .split(' ');
      stages.push({ image, name, instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return { args, stages };
}

/** `ENV A=1 B=2 …` -> entries (values without spaces, as this Dockerfile writes them). */
const envPairs = (args: string) =>
  args.split(' ').map((pair) => pair.split(/=(.*)/s).slice(0, 2) as [string, string]);

type Action =
  /** Provided by this machine or by the checkout's build (scripts/setup.sh); `check` proves it. */
  | { kind: 'given'; why: string; check?: (i: Instruction) => void }
  /** Run the instruction's command (re-rooted) in `cwd`. */
  | { kind: 'run' }
  /** Used when the service starts (ENV, USER, WORKDIR, HEALTHCHECK, CMD…). */
  | { kind: 'config' };

interface Step {
  stage: string;
  match: RegExp;
  action: Action;
}

const aptPackages = (i: Instruction) =>
  /apt-get install -y --no-install-recommends ((?:[\w.+-]+ ?)+) &&/.exec(i.args)?.[1]?.trim().split(' ') ??
  [];
const installedOnHost = (i: Instruction) => {
  for (const pkg of aptPackages(i)) {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own field syntax
    const status = spawnText('dpkg-query', ['-W', '-f=${Status}', pkg]);
    expect(status, `${pkg} (apt) on this machine`).toBe('install ok installed');
  }
};
function spawnText(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8' });
  } catch {
    return '';
  }
}

/** How every instruction of deploy/Dockerfile is reproduced here. */
const STEPS: Step[] = [
  { stage: 'rust', match: /^$/, action: { kind: 'given', why: 'the stage only carries the Rust toolchain' } },
  {
    stage: 'build',
    match: /^(COPY --from=rust \/usr\/local\/(rustup|cargo) |ENV RUSTUP_HOME=)/,
    action: { kind: 'given', why: "the Rust toolchain: the checkout's native build used this machine's" },
  },
  {
    stage: 'build',
    match: /^RUN apt-get update/,
    action: { kind: 'given', why: 'apt', check: installedOnHost },
  },
  {
    stage: 'build',
    match: /^(WORKDIR \/src|COPY package\.json package-lock\.json \.\/|RUN npm install .*|COPY \. \.)$/,
    action: { kind: 'given', why: 'the checkout (/src) as scripts/setup.sh installed it' },
  },
  {
    stage: 'build',
    match: /^RUN (--mount=\S+ )*npm run build:native$/,
    action: {
      kind: 'given',
      why: "npm run build:native: the checkout's npm/linux-x64-gnu (package.test.ts proves it self-contained)",
    },
  },
  {
    stage: 'build',
    match: /^RUN npm run build:ts$/,
    action: { kind: 'given', why: 'the global setup builds dist/' },
  },
  { stage: 'build', match: /^RUN node scripts\/pack\.mjs --out \/packages$/, action: { kind: 'run' } },
  {
    stage: 'install',
    match: /^RUN apt-get update/,
    action: { kind: 'given', why: 'apt', check: installedOnHost },
  },
  {
    stage: 'install',
    match:
      /^(COPY --from=build \/packages \/packages|WORKDIR \/src|COPY --from=build \/src\/scripts\/install-server\.sh scripts\/)$/,
    action: { kind: 'given', why: 'one directory holds every stage; /src is the checkout' },
  },
  {
    stage: 'install',
    match: /^RUN scripts\/install-server\.sh \/packages \/opt\/vidsheet$/,
    action: { kind: 'run' },
  },
  {
    stage: 'final',
    match: /^RUN apt-get update/,
    action: { kind: 'given', why: 'apt', check: installedOnHost },
  },
  {
    stage: 'final',
    match: /^COPY --from=install \/opt\/vidsheet \/opt\/vidsheet$/,
    action: { kind: 'given', why: 'one directory holds every stage' },
  },
  {
    stage: 'final',
    match: /^RUN mkdir -p \/var\/lib\/vidsheet && chown node:node \/var\/lib\/vidsheet$/,
    action: { kind: 'run' },
  },
  { stage: 'final', match: /^(ENV|WORKDIR|EXPOSE|USER|HEALTHCHECK|CMD) /, action: { kind: 'config' } },
];

const dockerfile = parseDockerfile(readFileSync(join(ROOT, 'deploy', 'Dockerfile'), 'utf8'));
const stageName = (stage: Stage, index: number) =>
  index === dockerfile.stages.length - 1 ? 'final' : (stage.name ?? String(index));
const finalStage = dockerfile.stages.at(-1) as Stage;
const last = (keyword: string) => finalStage.instructions.filter((i) => i.keyword === keyword).at(-1);

/** The unprivileged user the image's `USER node` becomes here (running as root, as setup does). */
const RUN_AS = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;

let work: string;
/** The image's root directory. */
let image: string;
let registry: TestRegistry;

/** The image's absolute paths under `image`; /src, the build's checkout, is this repository. */
const reroot = (text: string) =>
  text
    .replace(/(^|[\s=:])\/(packages|opt|var)\b/g, `$1${image}/$2`)
    .replace(/(^|[\s=:])\/src\b/g, `$1${ROOT}`);

function sh(command: string, cwd: string, env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', command], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'vs-image-'));
  // The image is world-readable, like a container's /opt; mkdtemp makes 0700.
  chmodSync(work, 0o755);
  image = join(work, 'image');
  mkdirSync(image);
  registry = await startRegistry([]);
}, 60_000);
afterAll(async () => {
  await registry?.close();
  removeServerDirs();
  rmSync(work, { recursive: true, force: true });
});

describe('deploy/Dockerfile, its final stage built into a directory', () => {
  it('has a step here for every instruction, and every step matches an instruction', () => {
    const used = new Set<Step>();
    const unknown: string[] = [];
    for (const [index, stage] of dockerfile.stages.entries()) {
      const name = stageName(stage, index);
      const instructions = stage.instructions.length > 0 ? stage.instructions : [{ keyword: '', args: '' }];
      for (const instruction of instructions) {
        const text = `${instruction.keyword} ${instruction.args}`.trim();
        const step = STEPS.find((s) => s.stage === name && s.match.test(text));
        if (step) used.add(step);
        else unknown.push(`${name}: ${text}`);
      }
    }
    expect(unknown, 'Dockerfile instructions this test does not reproduce').toEqual([]);
    expect(STEPS.filter((s) => !used.has(s)).map((s) => `${s.stage}: ${s.match}`)).toEqual([]);
  });

  it('is Debian bookworm with this Node major in every Node stage, the final one slim and unprivileged', () => {
    const node = dockerfile.stages.filter((s) => s.image.startsWith('node:')).map((s) => s.image);
    const major = process.versions.node.split('.')[0];
    expect(node).toEqual([`node:${major}-bookworm`, `node:${major}-bookworm`, `node:${major}-bookworm-slim`]);
    expect(finalStage.image).toBe(`node:${major}-bookworm-slim`);
    expect(readFileSync('/etc/os-release', 'utf8')).toMatch(/^VERSION_CODENAME=bookworm$/m);
    expect(last('USER')?.args).toBe('node');
    expect(last('HEALTHCHECK')?.args).toMatch(/ CMD \[.*\/healthz.*\]$/);
  });
});

describe('its final stage, built into a directory by the same steps', () => {
  beforeAll(async () => {
    // The steps that make the image's files, as the Dockerfile writes them.
    const npmEnv = {
      ...registry.env(join(work, 'npm-cache')),
      // Image paths stay image paths for npm: its cache and temp files live outside the image.
      TMPDIR: work,
    };
    for (const [index, stage] of dockerfile.stages.entries()) {
      const name = stageName(stage, index);
      let cwd = ROOT;
      for (const instruction of stage.instructions) {
        const text = `${instruction.keyword} ${instruction.args}`;
        if (instruction.keyword === 'WORKDIR') cwd = reroot(instruction.args);
        const step = STEPS.find((s) => s.stage === name && s.match.test(text));
        if (step?.action.kind === 'given') step.action.check?.(instruction);
        if (step?.action.kind !== 'run') continue;
        let command = reroot(instruction.args);
        if (RUN_AS) command = command.replace(/\bchown node:node\b/, `chown ${RUN_AS.uid}:${RUN_AS.gid}`);
        mkdirSync(cwd, { recursive: true });
        const result = await sh(command, cwd, npmEnv);
        if (result.code !== 0) throw new Error(`${name}: ${text} exited ${result.code}\n${result.output}`);
      }
    }
  }, 900_000);

  it('runs the service as the image does, answers its health check, and a hosted job runs native', async () => {
    // The final stage's configuration: ENV (PATH's tail is a directory holding only `node`, so no
    // ffmpeg is reachable), WORKDIR, USER, CMD, HEALTHCHECK.
    const bareBin = join(work, 'bare-bin');
    mkdirSync(bareBin);
    symlinkSync(process.execPath, join(bareBin, 'node'));
    const env: NodeJS.ProcessEnv = { HOME: work, LANG: 'C.UTF-8', NODE_DEBUG: 'vidsheet' };
    for (const instruction of finalStage.instructions.filter((i) => i.keyword === 'ENV')) {
      for (const [key, value] of envPairs(instruction.args))
        env[key] = reroot(value).replace('$PATH', bareBin);
    }
    expect(env.PATH?.split(':')).toEqual([join(image, 'opt/vidsheet/node_modules/.bin'), bareBin]);
    const cmd = JSON.parse(last('CMD')?.args ?? '[]') as string[];
    expect(cmd).toEqual(['vidsheet-server']);
    const bin = join(image, 'opt/vidsheet/node_modules/.bin', cmd[0] as string);

    const server = await startServer(
      {},
      {
        bin,
        baseEnv: env,
        dataDir: env.VIDSHEET_DATA_DIR,
        cwd: reroot(last('WORKDIR')?.args ?? '/'),
        user: RUN_AS,
      },
    );
    const healthcheck = JSON.parse(
      / CMD (\[.*\])$/.exec(last('HEALTHCHECK')?.args ?? '')?.[1] ?? '[]',
    ) as string[];
    const probe = () => runNode(healthcheck.slice(1), { env: server.env, ...RUN_AS });
    try {
      expect(healthcheck[0]).toBe('node');
      const healthy = await probe();
      expect(healthy.code, healthy.stderr).toBe(0);

      await hostedSmokeJob(server);
      const binding = join(
        image,
        'opt/vidsheet/node_modules/@vidsheet/binding-linux-x64-gnu/vidsheet.linux-x64-gnu.node',
      );
      expect(server.output()).toContain(`native binding: ${binding}`);
      expect(server.output()).toMatch(/engine: native$/m);
      expect((await server.waitForLog((l) => l.msg === 'job worker ready')).engine).toBe('native');
      if (RUN_AS) {
        const owner = spawnText('stat', ['-c', '%u', join(env.VIDSHEET_DATA_DIR as string, 'vidsheet.db')]);
        expect(owner.trim(), 'the ledger is written by the unprivileged user').toBe(String(RUN_AS.uid));
      }
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const down = await probe();
    expect(down.code, 'the health check fails once the service is down').toBe(1);
  }, 300_000);
});
