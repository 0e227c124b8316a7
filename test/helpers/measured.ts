/**
 * A job posted to a test server while its memory is watched (decode-cost and compressed-header
 * tests): the worker's own peak (VmHWM, its lifetime peak) and the largest peak of the ffmpeg or
 * ffprobe it starts (each sampled every 20 ms before it exits), and the time the answer took.
 */
import { readFileSync } from 'node:fs';
import { processes } from './procs.js';
import { postJob, type TestServer, videoForm, workerPid } from './server.js';

/** A process's peak resident size in bytes; 0 once it has exited. */
export function hwmBytes(pid: number): number {
  try {
    const kb = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return Number(kb ?? 0) * 1024;
  } catch {
    return 0; // exited meanwhile
  }
}

/** Posts `bytes` as a job of `key`: its answer, the time it took, the worker's and children's peaks. */
export async function postMeasured(server: TestServer, key: string, bytes: Buffer, filename: string) {
  const worker = workerPid(server);
  let child = 0;
  const timer = setInterval(() => {
    for (const p of processes())
      if (p.pgrp === worker && p.pid !== worker) child = Math.max(child, hwmBytes(p.pid));
  }, 20);
  try {
    const started = performance.now();
    const response = await postJob(server, key, videoForm({ bytes, filename }));
    const body = await response.text();
    const ms = performance.now() - started;
    return { status: response.status, body, ms, rss: hwmBytes(worker), child };
  } finally {
    clearInterval(timer);
  }
}
