"""How keel reads what a request asks for (keel.core.request): a change, only an answer, or to make sure.

A table of phrasings people write, both ways, in English, German, Spanish, French and Chinese. The rule
under test: "asks only for an answer" needs positive evidence (an explicit "don't change anything / just
explain", or a question that names nothing to change); a polite question with a change verb is a change
request; a defect reported is a change request; a language keel does not read is a change request.
Each row is a user-visible promise: a row read the wrong way is either a false done (a change request
read as a question ends complete with nothing done) or a question that can never end well.
"""

from __future__ import annotations

import pytest

from keel.core.request import parse_request

C, A, V = "change", "answer", "verify"
F = "forbids"   # an answer request that says in so many words not to change anything

TABLE: list[tuple[str, str, str]] = [
    # -- English: polite questions with a change verb are change requests (issue 32, item 1) -------------
    ("en", "Can you fix add() in calc.py?", C),
    ("en", "do the task", C),
    ("en", "find out which port the server should use", A),       # a modal in a wh-clause: no requirement
    ("en", "and in test_calc.py?", A),                          # a follow-up question: known words and a "?"                                   # an order: no "?", no person as subject
    ("en", "Do you know why it fails?", A),
    ("en", "Solve the exercise described in INSTRUCTIONS.md. The code goes in rle.py, which has only stubs.", C),
    ("en", "render.py should then show it after the text.", C),   # what the code must do, not "show me"
    ("en", "Explain what parse() should return.", A),
    ("en", "Could you add a sub() function?", C),
    ("en", "Would you mind renaming MAX_RETRY to MAX_RETRIES?", C),
    ("en", "Can you please make the failing test pass?", C),
    ("en", "Could you update the README with the new flag?", C),
    ("en", "Will you remove the debug prints from app.py?", C),
    ("en", "Is it possible to add retries to the client?", C),
    ("en", "Why don't you move the helper into utils.py?", C),
    ("en", "Hey, can you refactor parse() to use a dict?", C),
    ("en", "Can we handle empty input in parse()?", C),
    # -- English imperatives and bug reports ------------------------------------------------------------
    ("en", "Fix the failing test", C),
    ("en", "fix add()", C),
    ("en", "Add type hints to utils.py", C),
    ("en", "Please implement the cache as described in the docstring.", C),
    ("en", "Rename `fetch` to `fetch_all` everywhere.", C),
    ("en", "The list endpoint skips the first page: page 1 returns what should be page 2. paginate() is the "
           "culprit, I think.", C),
    ("en", "add() returns a - b instead of a + b.", C),
    ("en", "Why does paginate() skip the first page?", A),     # a question about a defect asks about it
    ("en", "What's wrong with calc.py? Fix it.", C),
    ("en", "Explain the bug in add() and then fix it.", C),
    ("en", "Look at calc.py and fix whatever is broken.", C),
    ("en", "I need you to write tests for the parser.", C),
    ("en", "Fix the typo in the README but don't change anything else.", C),
    ("en", "Make the tests pass without changing the tests.", C),
    ("en", "Don't touch the tests; fix the code so they pass.", C),
    ("en", "The parser crashes on empty input. Don't change the tests.", C),
    ("en", "utils.py needs type hints", C),
    ("en", "Could you take a look at the failing test?", C),
    # -- English: answer only, negation read (issue 32, item 2) ------------------------------------------
    ("en", "What does this project do? Just explain, do not change anything.", F),
    ("en", "Explain parse() without modifying it.", F),
    ("en", "Don't edit anything. What does calc.py do?", F),
    ("en", "List the failing tests, but don't fix them.", F),
    ("en", "How would you refactor parse()? Don't do it yet.", F),
    ("en", "Can you refactor parse()? Don't do it yet, just describe the steps.", F),
    ("en", "Why is test_calc failing? Only explain, no changes.", F),
    ("en", "Review calc.py for bugs. Read-only, please.", F),
    ("en", "Before you change anything, tell me your plan for the cache.", F),
    ("en", "add() returns the wrong value. Don't fix it, just explain why.", F),
    ("en", "Please don't modify any files; summarize what app.py does.", F),
    # -- English: questions that name nothing to change ---------------------------------------------------
    ("en", "What does add() return?", A),
    ("en", "what does calc.py do", A),
    ("en", "How does the cache decide what to evict?", A),
    ("en", "Where is the config loaded?", A),
    ("en", "Which files use parse()?", A),
    ("en", "Does the parser handle empty input?", A),
    ("en", "Is there a bug in add()?", A),
    ("en", "Is add() tested anywhere?", A),
    ("en", "How do I add a new subcommand?", A),
    ("en", "How should I fix the flaky test?", A),
    ("en", "What would you change in the retry logic?", A),
    ("en", "Explain how paginate() works.", A),
    ("en", "Tell me how to fix add().", A),
    ("en", "Describe the module layout.", A),
    ("en", "Review my change to calc.py.", A),
    ("en", "Summarize the README.", A),
    ("en", "What does this error mean: KeyError: 'port'?", A),
    ("en", "Explain why test_add fails.", A),
    ("en", "Can you explain what the cache does?", A),
    # -- English: make sure, and work that needs no change (the REPL's "run it", "commit it") ------------
    ("en", "Make sure the tests pass.", V),
    ("en", "run the slow job", V),
    ("en", "Commit the changes.", V),
    ("en", "Could you run the tests?", V),
    ("en", "never mind", A),
    ("en", "thanks!", A),
    ("en", "Ensure the build is green.", V),
    ("en", "Run the tests and check that everything passes.", V),
    # -- German ----------------------------------------------------------------------------------------
    ("de", "Kannst du den Fehler in add() beheben?", C),
    ("de", "Behebe den Fehler in calc.py.", C),
    ("de", "Füge bitte eine Funktion sub() hinzu.", C),
    ("de", "Könntest du parse() refaktorisieren?", C),
    ("de", "Bitte den Test reparieren.", C),
    ("de", "Die Funktion add() liefert ein falsches Ergebnis.", C),
    ("de", "Ändere die Tests nicht, behebe den Code.", C),
    ("de", "Was macht dieses Projekt? Bitte nichts ändern.", F),
    ("de", "Erkläre nur, was calc.py macht, ohne etwas zu ändern.", F),
    ("de", "Ändere nichts, sag mir nur, wo der Fehler liegt.", F),
    ("de", "Wie würdest du parse() refaktorisieren? Noch nicht umsetzen.", F),
    ("de", "Was macht die Funktion add()?", A),
    ("de", "Wie funktioniert der Cache?", A),
    ("de", "Erkläre mir die Architektur.", A),
    ("de", "Gibt es einen Fehler in add()?", A),
    ("de", "Stelle sicher, dass die Tests laufen.", V),
    ("de", "Kannst du mir erklären, was calc.py macht?", A),
    ("de", "Könntest du bitte die Tests ausführen?", V),
    # -- Spanish ----------------------------------------------------------------------------------------
    ("es", "¿Puedes arreglar add() en calc.py?", C),
    ("es", "¿Podrías añadir una función sub()?", C),
    ("es", "Arregla el test que falla.", C),
    ("es", "Por favor, cambia el nombre de fetch a fetch_all.", C),
    ("es", "La función add() devuelve un resultado incorrecto.", C),
    ("es", "No toques los tests y corrige el código.", C),
    ("es", "¿Qué hace este proyecto? Solo explica, no cambies nada.", F),
    ("es", "Explícame parse() sin modificarlo.", F),
    ("es", "¿Cómo refactorizarías parse()? Todavía no lo hagas.", F),
    ("es", "¿Qué hace la función add()?", A),
    ("es", "¿Cómo funciona la caché?", A),
    ("es", "Explica la estructura del proyecto.", A),
    ("es", "Asegúrate de que los tests pasen.", V),
    ("es", "¿Me puedes explicar qué hace calc.py?", A),
    ("es", "¿Me puedes arreglar add()?", C),
    # -- French -----------------------------------------------------------------------------------------
    ("fr", "Peux-tu corriger add() dans calc.py ?", C),
    ("fr", "Pourrais-tu ajouter une fonction sub() ?", C),
    ("fr", "Corrige le test qui échoue.", C),
    ("fr", "Renomme fetch en fetch_all, s'il te plaît.", C),
    ("fr", "La fonction add() renvoie un résultat faux.", C),
    ("fr", "Que fait ce projet ? Explique seulement, ne modifie rien.", F),
    ("fr", "Explique parse() sans le modifier.", F),
    ("fr", "Comment refactoriserais-tu parse() ? Pas encore de modification, juste le plan.", F),
    ("fr", "Que fait la fonction add() ?", A),
    ("fr", "Comment fonctionne le cache ?", A),
    ("fr", "Explique-moi l'architecture du projet.", A),
    ("fr", "Vérifie que les tests passent.", V),
    ("fr", "Peux-tu m'expliquer ce que fait calc.py ?", A),
    ("fr", "N'ajoute rien, dis-moi seulement ce que fait parse().", F),
    # -- Chinese ----------------------------------------------------------------------------------------
    ("zh", "你能修复 calc.py 里的 add() 吗？", C),
    ("zh", "请给 calc.py 添加一个 sub() 函数", C),
    ("zh", "帮我重构一下 parse()", C),
    ("zh", "add() 返回的结果不对，修一下", C),
    ("zh", "为什么 add() 返回错误的结果？", A),
    ("zh", "这个项目是做什么的？只解释，不要修改任何文件。", F),
    ("zh", "先别改代码，告诉我你会怎么重构 parse()", F),
    ("zh", "解释一下 parse()，不要修改它", F),
    ("zh", "add() 函数是做什么的？", A),
    ("zh", "怎么修复这个测试？", A),
    ("zh", "解释一下缓存是怎么工作的", A),
    ("zh", "审查一下 calc.py", A),
    ("zh", "确保所有测试都通过", V),
    # -- languages keel does not read: never answer-only ---------------------------------------------------
    ("ru", "Что делает этот проект?", C),
    ("ru", "Можешь исправить add() в calc.py?", C),
    ("ja", "このプロジェクトは何をしますか？", C),
    ("pt", "Você pode corrigir a função add()?", C),
]


def test_the_table_covers_both_ways_in_enough_languages():
    assert len(TABLE) >= 80
    langs = {lang for lang, _, _ in TABLE}
    assert {"en", "de", "es", "fr", "zh"} <= langs
    for lang in ("en", "de", "es", "fr", "zh"):
        kinds = {k for lg, _, k in TABLE if lg == lang}
        assert {C, F, A} <= kinds, lang


@pytest.mark.parametrize(("lang", "text", "want"), TABLE, ids=[f"{lang}:{text[:40]}" for lang, text, _ in TABLE])
def test_each_phrasing_is_read_as_people_mean_it(lang: str, text: str, want: str):
    request = parse_request(text)
    kind = A if want == F else want
    assert request.kind == kind, f"{text!r} read as {request.kind}: {request.why}"
    if want == F:
        assert request.forbids_change, f"{text!r}: the 'no change' was not read ({request.why})"
    if want == C:
        assert request.asks_change and not request.forbids_change
    if lang in ("en", "de", "es", "fr", "zh") and want != C:
        assert request.language == lang, (text, request.language)


def test_a_language_keel_does_not_read_says_so():
    request = parse_request("Что делает этот проект?")
    assert request.language == "unknown" and "language" in request.why


def test_what_must_not_change_and_what_to_change_are_read():
    request = parse_request("Fix add() in calc.py, but don't touch the tests.")
    assert request.keep_phrases == ("the tests",) or request.keep_phrases[0].startswith("the tests")
    assert request.change_phrases and request.change_phrases[0].startswith("fix")
    assert request.files == ("calc.py",) and request.functions == ("add",)


def test_an_empty_request_is_judged_by_the_checks_alone():
    assert parse_request("").kind == "verify" and parse_request("  \n").language == ""


def test_one_parse_per_text():
    assert parse_request("Fix calc.py") is parse_request("Fix calc.py")
