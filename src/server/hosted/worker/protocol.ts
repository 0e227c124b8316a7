/**
 * Messages between the server and its job worker process (Node IPC, structured clone). One job at
 * a time: the server asks for a prepared job (probe and plan), charges, then asks for the render,
 * or discards the job when it could not be paid.
 */
import type { ErrorCode, ErrorExtras } from '#vidsheet/core/errors.js';
import type { JobOutcome } from '#vidsheet/core/report.js';
import type { ProbeInfo } from '#vidsheet/engine/types.js';
import type { JobOptions, JobRequest } from '#vidsheet/job.js';

/** The JobOptions that cross the process boundary (no engine, callbacks or signal). */
export type WorkerJobOptions = Pick<
  JobOptions,
  'audio' | 'baseName' | 'maxSheets' | 'maxDurationS' | 'workDir' | 'containers' | 'maxPixels'
>;

export type ToWorker =
  | { type: 'prepare'; id: string; request: JobRequest; options: WorkerJobOptions }
  | { type: 'render'; id: string }
  | { type: 'discard'; id: string };

export interface SerializedError {
  code: ErrorCode;
  message: string;
  extras: ErrorExtras;
  detail?: string;
}

export type FromWorker =
  | { type: 'ready'; engine: string }
  | { type: 'prepared'; id: string; durationMs: number; sheets: number; frames: number; probe: ProbeInfo }
  | { type: 'done'; id: string; outcome: JobOutcome }
  | { type: 'failed'; id: string; error: SerializedError };
