//! The process's memory, as the allocator holds it.

/// Hands memory freed so far back to the system. glibc keeps freed memory in the arena of the
/// thread that freed it; the demuxer's stream probing (which decodes a picture) leaves a few
/// pictures' worth on this thread, resident while the workers decode on theirs.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        malloc_trim(0);
    }
}
