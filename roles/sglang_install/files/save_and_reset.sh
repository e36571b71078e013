#!/usr/bin/env bash
# Saves every local modification of a git tree (tracked changes and untracked, non-ignored files) to a patch file,
# then resets the tree to HEAD. Prints the patch path last. The name carries HEAD and a hash of the diff, so the
# same modifications saved twice give the same file. Re-apply with: git -C "$GPUSERVE_SRC" apply <patch>
set -euo pipefail
src=${GPUSERVE_SRC:?} dir=${GPUSERVE_PATCH_DIR:?}
cd "$src"
head=$(git rev-parse --verify HEAD)
# intent-to-add makes untracked files part of `git diff HEAD` (as new files)
git ls-files --others --exclude-standard -z | xargs -0 -r git add --intent-to-add --
sum=$(git diff --binary HEAD | sha256sum | cut -c1-12)
dest="$dir/sglang-${head:0:12}-$sum.patch"
tmp=$(mktemp "$dir/.sglang-patch.XXXXXX")
{
  printf '# gpuserve sglang_install: local modifications of %s on top of %s, saved before a reset\n' "$src" "$head"
  printf '# re-apply: git -C %s apply %s\n' "$src" "$dest"
  git status --porcelain=v1 | sed 's/^/# /'
  git diff --binary HEAD
} > "$tmp"
chmod 0640 "$tmp"
mv -f "$tmp" "$dest"
git reset --quiet --hard HEAD
git clean -fd --quiet
[ -z "$(git status --porcelain=v1 --untracked-files=all)" ] || { echo "tree still dirty after reset" >&2; exit 1; }
echo "$dest"
