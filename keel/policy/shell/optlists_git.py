"""Known-safe options of the git subcommands the policy can allow (format: ``optlists.py``).

``--output`` of the diff family is a write; ``--ext-diff``, ``--textconv``, ``--filters``,
``--open-files-in-pager``, ``--lost-found`` and every option that reads names from a file are
left out on purpose.
"""

from __future__ import annotations

# -- git ------------------------------------------------------------------------------------------
# Options shared by the commands that show diffs (diff, show, log -p, diff-tree ...). --output is a write.
_GIT_DIFF = (
    "-p -u --patch -s --no-patch -U= --unified= --output=W --output-indicator-new= --output-indicator-old= "
    "--output-indicator-context= --raw --patch-with-raw -t --indent-heuristic --no-indent-heuristic --minimal "
    "--patience --histogram --anchored= --diff-algorithm= --stat=? --compact-summary --numstat --shortstat "
    "--dirstat=? --cumulative --dirstat-by-file=? --summary --patch-with-stat -z --name-only --name-status "
    "--submodule=? --color=? --no-color --color-moved=? --no-color-moved --color-moved-ws= --no-color-moved-ws "
    "--word-diff=? --word-diff-regex= --color-words=? --no-renames --rename-empty --no-rename-empty --check "
    "--ws-error-highlight= --full-index --binary --abbrev=? -B=? --break-rewrites=? -M=? --find-renames=? -C=? "
    "--find-copies=? --find-copies-harder -D --irreversible-delete -l= --diff-filter= -S= -G= --find-object= "
    "--pickaxe-all --pickaxe-regex -O= --skip-to= --rotate-to= -R --relative=? --no-relative -a --text "
    "--ignore-cr-at-eol --ignore-space-at-eol -b --ignore-space-change -w --ignore-all-space "
    "--ignore-blank-lines -I= --ignore-matching-lines= --inter-hunk-context= -W --function-context --exit-code "
    "--quiet --no-ext-diff --no-textconv --ignore-submodules=? --src-prefix= --dst-prefix= --no-prefix "
    "--default-prefix --line-prefix= --ita-invisible-in-index --ita-visible-in-index -1 -2 -3 --base --ours "
    "--theirs -0 --cached --staged --merge-base --no-index --stat-width= --stat-name-width= --stat-count= "
    "--stat-graph-width= --no-stat")
# Options of the commands that walk history (log, shortlog, rev-list, show, whatchanged).
_GIT_REVS = (
    "-NUM -n= --max-count= --skip= --since= --after= --until= --before= --since-as-filter= --author= "
    "--committer= --grep-reflog= --grep= --all-match --invert-grep -i --regexp-ignore-case --basic-regexp -E "
    "--extended-regexp -F --fixed-strings -P --perl-regexp --remove-empty --merges --no-merges --min-parents= "
    "--max-parents= --no-min-parents --no-max-parents --first-parent --exclude-first-parent-only --not --all "
    "--branches=? --tags=? --remotes=? --glob= --exclude= --reflog --alternate-refs --single-worktree "
    "--ignore-missing --bisect --cherry-mark --cherry-pick --left-only --right-only --cherry -g "
    "--walk-reflogs --merge --boundary --simplify-by-decoration --show-pulls --full-history --dense --sparse "
    "--simplify-merges --ancestry-path=? --date-order --author-date-order --topo-order --reverse --no-walk=? "
    "--do-walk --format= --pretty=? --abbrev-commit --no-abbrev-commit --oneline --encoding= --expand-tabs=? "
    "--no-expand-tabs --notes=? --no-notes --show-notes=? --show-signature --relative-date --date= --parents "
    "--children --left-right --graph --show-linear-break=? --decorate=? --no-decorate --decorate-refs= "
    "--decorate-refs-exclude= --source --use-mailmap --mailmap --no-mailmap --no-use-mailmap --full-diff "
    "--log-size -L= --follow --no-follow -m --diff-merges= --no-diff-merges --combined-all-paths -c --cc "
    "--dd --remerge-diff --show-origin --count --timestamp --objects --objects-edge --unpacked --header "
    "--no-commit-id --root --clear-decorations --max-age= --min-age= -e -s --summary")
_GIT_SHORTLOG = "-n --numbered -s --summary -e --email -c --committer -w=? --group= --format="
_GIT_GREP = ("--cached --untracked --no-index --no-exclude-standard --exclude-standard --recurse-submodules -a "
             "--text -i --ignore-case -I --max-depth= -r --recursive --no-recursive -w --word-regexp "
             "-v --invert-match -h -H --full-name -E --extended-regexp -G --basic-regexp -P --perl-regexp -F "
             "--fixed-strings -n --line-number --column -l --files-with-matches --name-only -L "
             "--files-without-match -z --null -o --only-matching -c --count --color=? --no-color --break "
             "--heading -p --show-function -NUM -C= --context= -A= --after-context= -B= --before-context= -W "
             "--function-context -m= --max-count= --threads= -f= -e= --and --or --not --all-match -q --quiet "
             "--no-textconv")

GIT_LISTS: dict[str, str] = {
    "git status": "-s --short -b --branch --show-stash --porcelain=? --long -v --verbose -u --untracked-files=? "
                  "--ignore-submodules=? --ignored=? -z --column=? --no-column --ahead-behind --no-ahead-behind "
                  "--renames --no-renames --find-renames=?",
    "git diff": _GIT_DIFF,
    "git diff-files": _GIT_DIFF + " -q",
    "git diff-index": _GIT_DIFF + " -m",
    "git diff-tree": _GIT_DIFF + " -r --root --merge-base -m -c --cc -t -v --no-commit-id --always "
                     "--pretty=? --format= --abbrev-commit --combined-all-paths",
    "git log": _GIT_DIFF + " " + _GIT_REVS,
    "git whatchanged": _GIT_DIFF + " " + _GIT_REVS,
    "git show": _GIT_DIFF + " " + _GIT_REVS,
    "git rev-list": _GIT_REVS + " --quiet --disk-usage=?",
    "git shortlog": _GIT_REVS + " " + _GIT_SHORTLOG,
    "git reflog": _GIT_DIFF + " " + _GIT_REVS,
    "git blame": "-b --root --show-stats -L= -l -t -S= --reverse= --first-parent -p --porcelain --line-porcelain "
                 "--incremental --encoding= --contents= --date= --progress --no-progress -M=? -C=? --ignore-rev= "
                 "--color-lines --color-by-age -c --score-debug -f --show-name -n --show-number -s -e --show-email "
                 "-w --abbrev=?",
    "git annotate": "-b --root --show-stats -L= -l -t -S= -p --porcelain --date= -M=? -C=? -w --encoding=",
    "git rev-parse": "--parseopt --sq-quote --keep-dashdash --stop-at-non-option --stuck-long --revs-only "
                     "--no-revs --flags --no-flags --default= --prefix= --verify -q --quiet --sq --short=? --not "
                     "--abbrev-ref=? --symbolic --symbolic-full-name --output-object-format= --all --branches=? "
                     "--tags=? --remotes=? --glob= --exclude= --disambiguate= --local-env-vars --path-format= "
                     "--git-dir --git-common-dir --resolve-git-dir= --git-path= --show-toplevel "
                     "--show-superproject-working-tree --shared-index-path --absolute-git-dir "
                     "--is-inside-git-dir --is-inside-work-tree --is-bare-repository --is-shallow-repository "
                     "--show-cdup --show-prefix --show-object-format=? --show-ref-format --since= --after= "
                     "--until= --before= --end-of-options",
    "git ls-files": "-c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage --directory "
                    "--no-empty-directory -u --unmerged -k --killed -z --deduplicate -x= --exclude= "
                    "--exclude-standard --error-unmatch --with-tree= -t -v -f --full-name --recurse-submodules "
                    "--abbrev=? --debug --eol --format= --sparse",
    "git ls-tree": "-d -r -t -l --long -z --name-only --name-status --object-only --full-name --full-tree "
                   "--abbrev=? --format=",
    "git cat-file": "-t -s -e -p --mailmap --no-mailmap --allow-unknown-type",
    "git grep": _GIT_GREP,
    "git describe": "--dirty=? --broken=? --all --tags --contains --abbrev= --candidates= --exact-match --debug "
                    "--long --match= --exclude= --always --first-parent",
    "git name-rev": "--tags --refs= --exclude= --all --annotate-stdin --name-only --no-undefined --always",
    "git merge-base": "-a --all --octopus --independent --is-ancestor --fork-point",
    "git count-objects": "-v --verbose -H --human-readable",
    "git show-ref": "--head --branches --tags -d --dereference -s --hash=? --abbrev=? --verify -q --quiet "
                    "--exclude-existing=? --exists",
    "git for-each-ref": "--count= --shell --perl --python --tcl --sort= --format= --color=? --points-at= "
                        "--merged=? --no-merged=? --contains=? --no-contains=? --ignore-case --omit-empty "
                        "--exclude= --include-root-refs",
    "git check-ignore": "-q --quiet -v --verbose -n --non-matching --no-index -z",
    "git check-attr": "-a --all --cached -z --source=",
    "git cherry": "-v --abbrev=?",
    "git version": "--build-options",
    "git var": "-l",
    "git range-diff": _GIT_DIFF + " --creation-factor= --no-dual-color --left-only --right-only --notes=? "
                      "--no-notes",
    "git show-branch": "-r --remotes -a --all --current --topo-order --date-order --sparse --more= --list "
                       "--merge-base --independent --no-name --sha1-name --topics -g --reflog=? --color=? "
                       "--no-color",
    "git help": "-a --all --no-external-commands --no-aliases --verbose -g --guides -c --config --user-interfaces "
                "--developer-interfaces",
    "git fsck": "--unreachable --dangling --no-dangling --root --tags --cache --no-reflogs --full --no-full "
                "--connectivity-only --strict --verbose --name-objects --progress --no-progress",
    "git verify-commit": "-v --verbose --raw",
    "git verify-tag": "-v --verbose --raw --format=",
    "git show-index": "--object-format=",
    "git branch": "-a --all -r --remotes -v -vv --verbose -l --list --show-current --contains=? --no-contains=? "
                  "--merged=? --no-merged=? --points-at= --sort= --format= --color=? --no-color --column=? "
                  "--no-column -i --ignore-case --omit-empty --abbrev=? --no-abbrev -q --quiet "
                  "-d -D --delete -m -M --move -c -C --copy -f --force -u= --set-upstream-to= --unset-upstream "
                  "-t --track=? --no-track",
    "git tag": "-l --list -n=? --sort= --format= --contains=? --no-contains=? --merged=? --no-merged=? "
               "--points-at= --color=? --column=? --no-column -i --ignore-case --omit-empty",
    "git config": "--get --get-all --get-regexp --get-urlmatch --list -l --show-origin --show-scope --name-only "
                  "--null -z --type= --bool --int --bool-or-int --path --expiry-date --default= --local --global "
                  "--system --worktree --includes --no-includes get list --all --regexp --value= --fixed-value",
    "git remote": "-v --verbose get-url --push --all",
    "git stash": "list show -p --patch --stat --name-only --name-status --include-untracked -u --only-untracked",
    "git worktree": "list --porcelain -v --verbose --expire= -z",
    # the deletion itself asks unless a snapshot holds the files (git.py)
    "git clean": "-f --force -d -x -X -q --quiet -n --dry-run",
    "git notes": "list show --ref=",
}
