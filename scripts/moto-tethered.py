"""moto's S3-compatible server on loopback for the tests and benches, tied to the process that
started it: it serves until its standard input closes, so a test process that dies without
stopping it (a failed run, a killed worker) takes it along instead of leaving it running.

usage: python3 scripts/moto-tethered.py HOST PORT   (stdin: a pipe the parent holds open)
"""

import os
import sys

from moto.server import ThreadedMotoServer

server = ThreadedMotoServer(ip_address=sys.argv[1], port=int(sys.argv[2]), verbose=False)
server.start()
sys.stdin.buffer.read()  # returns at EOF: the parent closed the pipe, or is gone
os._exit(0)
