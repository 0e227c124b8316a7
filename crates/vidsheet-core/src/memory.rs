//! The process's memory, as the allocator holds it.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
use std::ffi::c_int;

/// Hands memory freed so far back to the system. glibc keeps freed memory in the arena of the
/// thread that freed it; the demuxer's stream probing (which decodes a picture) leaves a few
/// pictures' worth on this thread, resident while the workers decode on theirs.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        extern "C" {
            fn malloc_trim(pad: usize) -> c_int;
        }
        malloc_trim(0);
    }
}

/// The most malloc arenas a process decoding here uses, unless `MALLOC_ARENA_MAX` says otherwise.
pub(crate) const ARENAS: i32 = 2;

/// Caps glibc's malloc arenas at [`ARENAS`] unless the environment set `MALLOC_ARENA_MAX`. By
/// default each thread that allocates gets an arena of its own (up to 8 per core), and memory the
/// decoder threads free stays scattered across them, so a long-lived host creeps up job after job.
/// Arenas made before the first open stay (a Node host's own threads make some): the cap then holds
/// the decoder threads to those. 600 jobs in one Node process: 118-137 MB uncapped, 97-130 MB with
/// this cap, 83-98 MB with `MALLOC_ARENA_MAX=2` from the start (how the hosted worker is started);
/// CPU time within 1 % of each other.
pub(crate) fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        extern "C" {
            fn mallopt(param: c_int, value: c_int) -> c_int;
        }
        /// glibc's `M_ARENA_MAX` (malloc.h).
        const M_ARENA_MAX: c_int = -8;
        unsafe {
            mallopt(M_ARENA_MAX, ARENAS);
        }
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use std::process::Command;

    /// Set in the child run of this test binary: which setup it runs before counting its arenas.
    const CHILD: &str = "VIDSHEET_ARENA_CHILD";

    /// This test binary run again, alone, on `arenas_in_child` (a fresh process: the other tests'
    /// threads made their arenas already), with or without the cap; the number of arenas it used.
    fn arenas_in_fresh_process(limited: bool) -> usize {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "memory::tests::arenas_in_child",
                "--ignored",
                "--nocapture",
            ])
            .args(["--test-threads=1"])
            .env(CHILD, if limited { "limited" } else { "default" })
            .env_remove("MALLOC_ARENA_MAX")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        // The harness prints the test's name on the same line, before it.
        let count = stdout.split("arenas=").nth(1).unwrap();
        count.split_whitespace().next().unwrap().parse().unwrap()
    }

    #[test]
    fn decoding_hosts_use_at_most_two_arenas() {
        // The oracle is glibc's own account (malloc_info), in a process where 16 threads allocate
        // at once: capped, they share two arenas; without the cap, each gets one of its own.
        assert!(arenas_in_fresh_process(false) > super::ARENAS as usize + 4);
        assert!(arenas_in_fresh_process(true) <= super::ARENAS as usize);
    }

    #[test]
    #[ignore = "the child half of decoding_hosts_use_at_most_two_arenas"]
    fn arenas_in_child() {
        let Ok(mode) = std::env::var(CHILD) else {
            return;
        };
        if mode == "limited" {
            crate::media::init();
        }
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(16));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let held: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 4096]).collect();
                    barrier.wait();
                    drop(held);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        println!("arenas={}", count_arenas());
    }

    /// The `<heap nr=...>` entries of glibc's `malloc_info`: one per arena.
    fn count_arenas() -> usize {
        extern "C" {
            fn malloc_info(
                options: std::ffi::c_int,
                stream: *mut std::ffi::c_void,
            ) -> std::ffi::c_int;
            fn open_memstream(
                buf: *mut *mut std::ffi::c_char,
                size: *mut usize,
            ) -> *mut std::ffi::c_void;
            fn fclose(stream: *mut std::ffi::c_void) -> std::ffi::c_int;
            fn free(ptr: *mut std::ffi::c_void);
        }
        unsafe {
            let mut buf = std::ptr::null_mut();
            let mut size = 0;
            let stream = open_memstream(&mut buf, &mut size);
            malloc_info(0, stream);
            fclose(stream);
            let text = std::ffi::CStr::from_ptr(buf).to_string_lossy().into_owned();
            free(buf.cast());
            text.matches("<heap nr=").count()
        }
    }
}
