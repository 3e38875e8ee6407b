//! Atomic file replacement: write a temp file beside the target, flush it to disk, rename
//! it over the target. A crash leaves either the old file or the new one, never half.

use std::fs;
use std::io::Write;
use std::path::Path;

pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|_| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    // The rename is durable only once the directory entry is; failing to sync the
    // directory (some filesystems refuse) does not undo the write.
    if result.is_ok()
        && let Ok(d) = fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/x.json");
        super::write(&p, b"one").unwrap();
        super::write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("x.json")]);
    }
}
