# Sourced by scripts/bundle.sh and scripts/device_pack.sh.
# copy_runtime_libs DEST BIN...: copies into DEST every shared library the ELF binaries BIN
# need that is neither glibc / libstdc++ nor CUDA's own (the GPU machine has those, in
# matching versions). Non-ELF arguments (scripts) are skipped.
copy_runtime_libs() {
  local dest=$1 bin lib
  shift
  mkdir -p "$dest"
  for bin in "$@"; do
    [ -x "$bin" ] && file "$bin" | grep -q ELF || continue
    ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
        libcuda.so*|libcublas*|libcublasLt*|libnccl*|libcudart*) ;;
        *) [ -e "$dest/$(basename "$lib")" ] || cp -L "$lib" "$dest/" ;;
      esac
    done
  done
}
