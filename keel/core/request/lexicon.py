"""The words the request reader understands, per language: data, checked by tests/test_request_kind.py.

Four alphabetic languages (English, German, Spanish, French) and Chinese. Words are lower-case; a
word the table does not hold means nothing to the reader, so a language it does not hold at all is
never read as "asks only for an answer" (keel.core.request.kind).

Per language:

- ``function_words``: common words that tell the language apart (detection only).
- ``change``: verb forms that ask for a change when they stand where a request's verb stands (the
  clause's first word, after "and"/"then"/"please", after "to", or anywhere in a clause that opens
  with a polite request such as "can you").
- ``change_anywhere``: forms that are requests wherever they stand in a clause (German imperatives
  such as "behebe", whose verb may come after the object).
- ``negated_only``: verbs that count only in a negation ("don't touch anything").
- ``answer``: verbs that ask for words (explain, describe …); ``answer_weak``: verbs that ask for words
  unless the request also reports a defect ("find the bug" may well mean fix it).
- ``wh``: question words whose question asks about something ("why does …", "how would you …"): a
  change verb in such a question is talked about, not asked for.
- ``aux``: words a yes/no question opens with ("is", "does"); ``polite``: openings that turn a question
  into a request ("can you", "could you"), as tuples of words.
- ``negators``: words before a verb that negate it; ``negators_after``: words after it in the same
  clause ("ändere nichts", "ne modifie rien").
- ``fillers``: words a clause may open with before its verb ("please", "also", "and").
- ``to``: the infinitive marker ("to", "zu").
- ``global_objects``: what a negated verb's object must be for the negation to cover the workspace
  ("anything", "the code"); ``scope_words`` after it narrow it again ("anything else").
- ``directives``: phrases that ask for no change in so many words ("just explain", "read-only").
- ``postpone``: phrases that put the change off ("not yet"); they outweigh a change verb.
- ``defect``: words that report something broken; ``whether``: yes/no openings that ask whether a
  defect exists ("is there"), which stay questions; ``meaning``: words that make a question about a
  defect a question about words ("what does this error mean?").
- ``verify``: phrases that ask to make sure of something ("make sure the tests pass"): the checks
  decide, and a change may or may not be needed; ``act``: verbs of work that need change no file ("run
  the slow job", "commit it", "use the fx server"), read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lexicon:
    name: str
    function_words: frozenset[str]
    change: frozenset[str]
    answer: frozenset[str]
    answer_weak: frozenset[str]
    wh: frozenset[str]
    aux: frozenset[str]
    polite: tuple[tuple[str, ...], ...]
    negators: frozenset[str]
    fillers: frozenset[str]
    global_objects: frozenset[str]
    scope_words: frozenset[str]
    directives: tuple[str, ...]
    postpone: tuple[str, ...]
    defect: frozenset[str]
    defect_phrases: tuple[str, ...] = ()
    change_anywhere: frozenset[str] = frozenset()
    negated_only: frozenset[str] = frozenset()
    negators_after: frozenset[str] = frozenset()
    to: frozenset[str] = frozenset()
    hypothetical: tuple[tuple[str, ...], ...] = ()
    whether: tuple[tuple[str, ...], ...] = ()
    suggestion: tuple[tuple[str, ...], ...] = ()   # wh-openings that ask for the change ("why don't you")
    verify: tuple[str, ...] = ()                   # "make sure", "ensure": the checks decide, a change may follow
    answer_nouns: frozenset[str] = frozenset()     # "I'd like a summary": asks for words wherever it stands
    act: frozenset[str] = frozenset()              # "run the job", "commit it": work that need change no file
    verb_final: bool = False                       # a polite request's verb comes last (German)
    social: frozenset[str] = frozenset()           # "hi", "thanks": a request of only these asks for words
    meaning: frozenset[str] = frozenset()          # "what does this error mean?" asks about words, not the defect
    # "render.py should show it", "parse() must return None": what the code is to do, a requirement (a
    # change), not a request to show or say something
    modals: frozenset[str] = frozenset()
    # "do the task", "do it": an aux that opens an order when no "?" ends the sentence and no person is
    # its subject ("do you …" asks); ``subjects`` are those persons
    imperative_aux: frozenset[str] = frozenset()
    subjects: frozenset[str] = frozenset()


def _w(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _p(*phrases: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(p.split()) for p in phrases)


ENGLISH = Lexicon(
    name="en",
    function_words=_w("the a an is are was were be this that these those it its of to in on for with and or but "
                      "what why how where which who when does do did can could would should will you your me my "
                      "i we our please not don't just only any all from by as at if then so there here has have run"),
    change=_w("fix repair correct resolve patch implement add create write generate make build change update "
              "modify edit rename move remove delete replace refactor rewrite convert migrate extract inline "
              "introduce handle enable disable bump upgrade downgrade configure tidy optimize optimise improve "
              "translate apply debug adjust extend rework drop split merge restructure clean wire port finish "
              "complete implementing fixing adding changing modifying editing renaming removing deleting "
              "refactoring rewriting updating creating writing making touching applying solve"),
    negated_only=_w("touch alter"),
    answer=_w("explain describe summarize summarise tell show review clarify compare outline list walk answer "
              "suggest propose recommend evaluate assess critique explaining describing reviewing say remind"),
    answer_weak=_w("find locate check investigate analyze analyse identify diagnose look inspect examine read "
                   "understand trace count report measure estimate"),
    wh=_w("what what's whats why how how's where where's which who whom whose when"),
    aux=_w("is are was were does do did can could would will should shall has have had may might am isn't "
           "aren't doesn't don't didn't"),
    polite=_p("can you", "could you", "would you", "will you", "won't you", "can u", "could u", "would you mind",
              "do you mind", "can we", "could we", "would you be able to", "are you able to", "is it possible to",
              "would it be possible to", "i need you to", "i want you to", "i'd like you to", "i would like you to",
              "we need to", "i need to", "we should", "you should", "you need to", "you must", "you have to",
              "please", "pls", "plz", "kindly", "let's", "lets", "go ahead and", "try to", "help me", "i want to",
              "i'd like to", "we want to", "make sure to", "be sure to", "remember to", "don't forget to"),
    negators=_w("don't dont do not never no without avoid nor stop"),
    fillers=_w("please pls plz kindly just also and then now so ok okay hey hi first next finally afterwards "
               "after that but, but quickly simply"),
    to=_w("to"),
    global_objects=_w("anything nothing any everything code codebase workspace repo repository files file "
                      "it them this that yet thing things changes change edits"),
    scope_words=_w("else other outside except besides but in under inside within apart beyond"),
    directives=("just explain", "only explain", "just tell me", "only tell me", "just answer", "only answer",
                "just describe", "only describe", "just summarize", "only summarize", "just review",
                "only review", "just list", "only list", "just show me", "only show me", "no changes",
                "no code changes", "no edits", "no modifications", "read-only", "read only", "answer only",
                "explanation only", "explain only", "words only", "leave the code as is", "leave it as is",
                "leave everything as is", "leave the code alone", "leave it alone", "leave the files alone",
                "leave everything untouched", "i only want an explanation", "i just want an explanation",
                "i only want to understand", "i just want to understand", "i'm just asking", "just asking",
                "just curious", "only curious", "purely a question", "just a question"),
    postpone=("not yet", "don't do it yet", "do not do it yet", "don't change it yet", "don't fix it yet",
              "before you change anything", "before changing anything", "before you make any changes",
              "before making any changes", "don't make the change yet", "hold off"),
    defect=_w("bug bugs buggy broken breaks crash crashes crashed crashing culprit regression regressed wrong "
              "wrongly incorrect incorrectly fails failing failed failure failures error errors exception "
              "exceptions traceback skip skips skipped ignores ignored lose loses leak leaks leaking hang hangs "
              "hanging freezes typo typos flaky segfault segfaults panics fail crash break"),
    defect_phrases=("doesn't work", "does not work", "isn't working", "is not working", "not working",
                    "doesn't return", "does not return", "doesn't handle", "does not handle", "instead of",
                    "off by one", "off-by-one", "no longer", "should return", "should be", "should not",
                    "shouldn't", "is expected", "was expected", "doesn't compile", "does not compile",
                    "won't start", "doesn't start", "returns the wrong", "gives the wrong", "why doesn't", "why isn't",
                    "why won't", "why can't", "why don't", "why aren't", "why didn't", "why does not", "why is not"),
    hypothetical=_p("how to", "what to", "whether to", "which to", "where to", "way to", "ways to",
                    "should i", "should we", "shall i", "would it be", "is it safe to", "is it worth",
                    "is it a good idea to", "is it better to", "the best way to", "what would", "what should",
                    "how would", "how should", "how could", "how can", "how do", "how might", "what if"),
    whether=_p("is there", "are there", "is it", "do you see", "can you see", "could there", "might there",
               "does it have", "do they have", "does this have", "did you find", "have you found", "any"),
    suggestion=_p("why don't you", "why not", "how about", "what about"),
    verify=("make sure", "ensure", "verify", "confirm", "double-check", "double check", "check that",
            "check if", "check whether", "see if the tests pass", "see whether the tests pass"),
    meaning=_w("mean means meaning stand stands"),
    modals=_w("should must shall needs"),
    imperative_aux=_w("do"),
    subjects=_w("you i we they u y'all"),
    answer_nouns=_w("summary overview explanation walkthrough opinion thoughts rundown"),
    social=_w("hi hello hey thanks thank you thx ok okay cheers good morning bye never mind nevermind forget it "
              "stop cancel that's all no"),
    act=_w("run execute start launch restart commit push pull install deploy use try test benchmark profile "
           "format lint rerun re-run invoke call"),
)

GERMAN = Lexicon(
    name="de",
    function_words=_w("der die das den dem des ein eine einen und oder ist sind nicht nichts was warum wie wo "
                      "welche welcher welches bitte du sie ich wir mit für von zu im in auf dass kannst könntest "
                      "nur auch noch keine kein es ob diese dieser dieses funktion datei"),
    change=_w("beheben reparieren korrigieren hinzufügen ergänzen implementieren erstellen schreiben ändern "
              "aktualisieren bearbeiten umbenennen verschieben entfernen löschen ersetzen refaktorieren "
              "refaktorisieren fixen optimieren verbessern anpassen aufräumen anlegen erweitern umschreiben"),
    change_anywhere=_w("behebe beheb repariere korrigiere füge ergänze implementiere erstelle schreibe schreib "
                       "ändere änder aktualisiere bearbeite benenne verschiebe entferne lösche ersetze "
                       "refaktoriere refaktorisiere mach mache baue fixe optimiere verbessere passe räume lege "
                       "erweitere"),
    negated_only=_w("anfassen fasse"),
    answer=_w("erkläre erklär erklären beschreibe beschreiben fasse zusammenfassen sag sage sagen zeig zeige "
              "zeigen liste nenne begutachte reviewe bewerte vergleiche"),
    answer_weak=_w("finde prüfe überprüfe analysiere untersuche schau sieh"),
    wh=_w("was warum wieso weshalb wie wo welche welcher welches welchen welchem wer wann woran wozu"),
    aux=_w("ist sind gibt hat haben macht kann funktioniert wird werden war"),
    polite=_p("kannst du", "könntest du", "würdest du", "wirst du", "willst du", "können sie", "könnten sie",
              "würden sie", "bitte", "ich möchte dass du", "ich möchte, dass du", "du sollst", "du musst",
              "ich will dass du", "wir müssen", "ich brauche"),
    negators=_w("nicht nichts kein keine keinen keinem ohne nie niemals"),
    negators_after=_w("nicht nichts"),
    fillers=_w("bitte und dann auch jetzt zuerst danach noch nur aber"),
    to=_w("zu"),
    global_objects=_w("nichts etwas irgendwas code dateien datei es sie das alles"),
    scope_words=_w("anderes sonst außer ausser in im"),
    directives=("nur erklären", "erkläre nur", "erklär nur", "nur erklärt", "sag mir nur", "nur beschreiben",
                "keine änderungen", "nichts ändern", "ändere nichts", "änder nichts", "nichts verändern",
                "ohne etwas zu ändern", "ohne es zu ändern", "ohne den code zu ändern", "nichts anfassen",
                "fasse nichts an", "nur lesen", "nur eine erklärung", "nur eine frage"),
    postpone=("noch nicht", "bevor du etwas änderst", "vorerst nicht", "erst mal nicht", "erstmal nicht"),
    defect=_w("fehler bug bugs kaputt absturz stürzt falsch falsche falschen fehlerhaft fehlschlägt "
              "fehlschlagen scheitert schlägt ausnahme exception hängt"),
    defect_phrases=("funktioniert nicht", "geht nicht", "stürzt ab", "schlägt fehl", "statt"),
    hypothetical=_p("wie würdest", "wie würde", "wie kann", "wie könnte", "wie sollte", "wie soll", "wie man",
                    "was würdest", "was sollte", "sollte ich", "sollten wir", "soll ich"),
    whether=_p("gibt es", "ist da", "siehst du", "hat es"),
    suggestion=_p("warum nicht"),
    verify=("stelle sicher", "stell sicher", "sorge dafür", "vergewissere dich", "prüfe ob", "überprüfe ob",
            "sorge dafür dass"),
    meaning=_w("bedeutet bedeuten heißt"),
    answer_nouns=_w("zusammenfassung überblick erklärung einschätzung"),
    social=_w("hallo hi danke dir schön guten morgen tag servus tschüss egal vergiss es schon gut"),
    act=_w("starte führe ausführen starten committe committen installiere installieren benutze nutze teste testen"),
    verb_final=True,
)

SPANISH = Lexicon(
    name="es",
    function_words=_w("el la los las un una y o es son no que qué por porqué para con de del en este esta "
                      "esto cómo como dónde donde cuál cual puedes podrías favor solo sólo nada sin lo le me "
                      "función archivo hace"),
    change=_w("arregla arreglar arréglalo arreglalo corrige corregir corrígelo corrigelo repara reparar añade "
              "añadir agrega agregar implementa implementar crea crear escribe escribir cambia cambiar modifica "
              "modificar actualiza actualizar edita editar renombra renombrar mueve mover elimina eliminar borra "
              "borrar quita quitar reemplaza reemplazar refactoriza refactorizar haz mejora mejorar optimiza "
              "optimizar soluciona solucionar soluciónalo arreglen corrijan"),
    change_anywhere=_w("cambies modifiques toques arregles edites corrijas hagas borres elimines"),
    negated_only=_w("toques tocar toca"),
    answer=_w("explica explícame explicame explicar describe descríbeme describir resume resumir dime decir "
              "muéstrame muestrame muestra enumera lista revisa revisar compara sugiere"),
    answer_weak=_w("encuentra busca analiza investiga comprueba verifica mira"),
    wh=_w("qué que por porqué cómo como dónde donde cuál cual cuáles quién quien cuándo cuando"),
    aux=_w("es son está están hay tiene hace funciona puede"),
    polite=_p("puedes", "podrías", "podrias", "puede usted", "podría usted", "podria", "podría", "por favor",
              "necesito que", "quiero que", "me gustaría que", "hay que", "te pido que", "serías capaz de"),
    negators=_w("no sin nunca ni"),
    negators_after=_w("nada"),
    fillers=_w("y luego también tambien ahora primero después despues solo sólo pero e me te nos"),
    global_objects=_w("nada código codigo archivos archivo lo la los las todo"),
    scope_words=_w("más mas otro otra excepto salvo en fuera"),
    directives=("solo explica", "sólo explica", "solo explícame", "solo dime", "sólo dime", "solo describe",
                "no cambies nada", "no modifiques nada", "sin cambiar nada", "sin modificar nada",
                "sin modificarlo", "sin cambiarlo", "sin tocar nada", "no toques nada", "no toques el código",
                "sin cambios", "ningún cambio", "solo una pregunta", "solo lectura"),
    postpone=("todavía no", "todavia no", "aún no", "aun no", "antes de cambiar nada", "de momento no"),
    defect=_w("error errores fallo falla fallan fallando roto rota bug bugs incorrecto incorrecta mal excepción "
              "excepcion cuelga"),
    defect_phrases=("no funciona", "se cae", "se rompe", "en lugar de", "en vez de"),
    hypothetical=_p("cómo arreglarías", "como arreglarias", "cómo puedo", "como puedo", "cómo podría",
                    "cómo se", "como se", "qué cambiarías", "qué debería", "debería", "deberíamos"),
    whether=_p("hay algún", "hay algun", "hay", "ves algún"),
    suggestion=_p("por qué no", "porque no"),
    verify=("asegúrate", "asegurate", "verifica que", "comprueba que", "confirma que"),
    meaning=_w("significa significan"),
    answer_nouns=_w("resumen explicación explicacion opinión"),
    social=_w("hola gracias buenos días dias buenas muchas olvídalo olvidalo no importa déjalo"),
    act=_w("ejecuta ejecutar corre correr inicia iniciar instala instalar usa usar prueba probar"),
)

FRENCH = Lexicon(
    name="fr",
    function_words=_w("le la les un une des et ou est sont ne pas que qu'est-ce quoi pourquoi comment où "
                      "quel quelle quels quelles du de dans ce cette ces tu vous peux pourrais rien seulement "
                      "juste sans fonction fichier fait il"),
    change=_w("corrige corriger répare réparer repare ajoute ajouter implémente implémenter implemente crée créer "
              "cree creer écris écrire ecris change changer modifie modifier renomme renommer déplace déplacer "
              "supprime supprimer enlève enlever remplace remplacer refactorise refactoriser fais améliore "
              "améliorer optimise optimiser règle régler mets mettre"),
    negated_only=_w("touche toucher"),
    answer=_w("explique expliquer explique-moi décris décrire decris résume résumer resume dis dis-moi "
              "montre montre-moi liste énumère compare relis"),
    answer_weak=_w("trouve cherche analyse examine vérifie verifie regarde"),
    wh=_w("que qu'est-ce quoi pourquoi comment où ou quel quelle quels quelles qui quand qu'est"),
    aux=_w("est-ce est sont y a-t-il"),
    polite=_p("peux-tu", "pourrais-tu", "pouvez-vous", "pourriez-vous", "tu peux", "vous pouvez",
              "tu pourrais", "vous pourriez", "merci de", "veuillez", "je voudrais que tu", "il faut",
              "s'il te plaît", "s'il vous plaît", "stp", "svp", "est-ce que tu peux", "est-ce que vous pouvez"),
    negators=_w("ne n' sans jamais"),
    negators_after=_w("rien"),
    fillers=_w("et puis ensuite aussi maintenant d'abord stp svp mais"),
    global_objects=_w("rien code fichiers fichier le la les tout"),
    scope_words=_w("d'autre autre sauf dans hors"),
    directives=("explique seulement", "explique simplement", "juste explique", "explique juste",
                "seulement expliquer", "ne change rien", "ne modifie rien", "ne modifiez rien", "ne changez rien",
                "sans rien changer", "sans rien modifier", "sans modifier le code", "sans le modifier",
                "sans les modifier", "n'y touche pas", "ne touche à rien", "aucune modification",
                "aucun changement", "juste une question", "lecture seule", "dis-moi seulement", "dis-moi juste"),
    postpone=("pas encore", "pas tout de suite", "avant de changer quoi que ce soit", "avant de modifier"),
    defect=_w("erreur erreurs bug bugs bogue plante cassé cassée casse échoue echoue échec faux fausse "
              "incorrect incorrecte exception"),
    defect_phrases=("ne fonctionne pas", "ne marche pas", "au lieu de"),
    hypothetical=_p("comment corrigerais-tu", "comment corrigerais", "comment puis-je", "comment pourrais-je",
                    "comment faire", "comment corriger", "comment", "que changerais-tu", "devrais-je",
                    "faudrait-il"),
    whether=_p("y a-t-il", "est-ce qu'il y a", "vois-tu"),
    suggestion=_p("pourquoi ne pas"),
    verify=("assure-toi", "assurez-vous", "vérifie que", "verifie que", "vérifiez que"),
    meaning=_w("signifie veut dire"),
    answer_nouns=_w("résumé explication aperçu avis"),
    social=_w("bonjour salut merci beaucoup bonsoir laisse tomber peu importe oublie"),
    act=_w("lance lancer exécute exécuter execute démarre démarrer installe installer utilise utiliser teste tester"),
)

ALPHABETIC = (ENGLISH, GERMAN, SPANISH, FRENCH)


@dataclass(frozen=True)
class HanLexicon:
    """Chinese: no spaces between words, so phrases are found as substrings of a clause."""

    name: str
    change: tuple[str, ...]
    negators: tuple[str, ...]
    negated_only: tuple[str, ...]
    global_after: tuple[str, ...]
    answer: tuple[str, ...]
    answer_weak: tuple[str, ...]
    polite: tuple[str, ...]
    wh: tuple[str, ...]
    particles: tuple[str, ...]
    directives: tuple[str, ...]
    postpone: tuple[str, ...]
    defect: tuple[str, ...]
    whether: tuple[str, ...]
    verify: tuple[str, ...]
    meaning: tuple[str, ...]
    statement: tuple[str, ...]   # marks around a verb that make it a statement: 修改了 "changed", 会修改 "changes"
    act: tuple[str, ...]         # work that needs no change: 运行, 提交
    social: tuple[str, ...]      # a request of only these asks for words: 谢谢, 算了


CHINESE = HanLexicon(
    name="zh",
    change=("修复", "修正", "修改", "更改", "改成", "改为", "改掉", "改一下", "改下", "改好", "添加", "增加", "加上",
            "加一个", "加个", "新增", "实现", "重构", "重命名", "改名", "删除", "删掉", "移除", "去掉", "更新",
            "创建", "新建", "编写", "写一个", "写个", "优化", "替换", "解决", "改进", "补充", "调整", "移动", "修一下",
            "处理一下", "改"),
    negators=("不要", "别", "不用", "无需", "不需要", "不必", "勿", "先不要", "暂时不要", "不能", "没让你"),
    negated_only=("动", "碰"),
    global_after=("任何", "代码", "文件", "它", "它们", "这些", "东西", "", "了"),
    answer=("解释", "说明", "讲解", "介绍", "描述", "总结", "概括", "告诉我", "说说", "讲讲", "审查", "评审", "审阅",
            "列出", "比较", "建议"),
    answer_weak=("分析", "检查", "看看", "看一下", "找出", "查找", "找到"),
    polite=("能不能", "能否", "可以", "可否", "麻烦", "请", "帮我", "帮忙", "你能", "你可以", "给我"),
    wh=("什么", "为什么", "为何", "怎么", "怎样", "如何", "哪", "谁", "多少", "何时"),
    particles=("吗", "呢", "是否", "是不是", "有没有", "会不会", "能不能"),
    directives=("只解释", "只需解释", "只需要解释", "只要解释", "仅解释", "只说明", "只需说明", "不要修改任何",
                "不要改任何", "不要动代码", "不要修改代码", "不要修改文件", "什么都不要改", "不做任何修改",
                "不要做任何修改", "不需要修改", "只读", "只是问一下", "只是想了解"),
    postpone=("先不要", "先别", "暂时不要", "暂时别", "还不要"),
    defect=("错误", "报错", "崩溃", "失败", "有问题", "不对", "不正确", "异常", "出错", "bug", "挂了"),
    whether=("有没有", "是否有", "有什么问题吗", "有问题吗"),
    verify=("确保", "确认", "验证"),
    act=("运行测试", "跑一下测试", "跑测试", "运行", "执行", "启动", "提交", "安装"),
    meaning=("什么意思", "意思", "含义"),
    statement=("了", "过", "会", "的", "在"),
    social=("你好", "谢谢", "多谢", "算了", "不用了", "没事", "好的"),
)
