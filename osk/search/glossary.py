"""A small Korean ↔ English glossary of general software-development words.

Korean developers write notes that mix Korean prose with English terms, and ask in either
language. Character bigrams cannot connect ``리플레이`` to ``replay``, so a query is expanded,
at a reduced weight, with the other language's words for the terms it contains. The list is
general developer vocabulary (tools, process, systems, text, time, people), the kind of
words any project's notes use; it deliberately holds no project names or product facts.
Transliterated loanwords (서버, 빌드, 캐시) are the bulk of it, because they are the words a
Korean note is most likely to use where an English question would use the original.

Format: one entry a line, ``korean: english, english`` (alternatives comma-separated; an
English alternative may be a phrase). Blank lines and ``#`` comments are ignored.
"""

from __future__ import annotations

GLOSSARY = """
# process and tools
빌드: build
배포: deploy, deployment, release
릴리스: release
릴리즈: release
출시: release, launch, ship
버전: version
업데이트: update
업그레이드: upgrade
설치: install, installation
삭제: delete, remove
제거: remove, removal
추가: add
변경: change
수정: fix, modify, edit
버그: bug
테스트: test
검증: verify, validation
리뷰: review
커밋: commit
브랜치: branch
병합: merge
머지: merge
저장소: repository, repo
의존성: dependency
라이브러리: library
패키지: package
패키지 매니저: package manager
모듈: module
플러그인: plugin
확장: extension
스크립트: script
명령: command
명령어: command
터미널: terminal
셸: shell
쉘: shell
편집기: editor
에디터: editor
문서: documentation, docs, document
문서화: documentation
주석: comment
코드: code
함수: function
변수: variable
환경변수: environment variable
환경 변수: environment variable
설정: config, configuration, setting, settings
설정 파일: config file
구성: configuration
옵션: option
플래그: flag
기본값: default
기본: default
우선순위: priority, precedence, order
규칙: rule, convention
컨벤션: convention
정책: policy
결정: decision
이유: reason, why
원인: cause, root cause, why
문제: problem, issue
해결: fix, solution, resolve
방법: how, method, way
절차: procedure, process, steps
순서: order, sequence
자동: automatic, auto
수동: manual, manually
로컬: local, locally
원격: remote
실행: run, execute
재시작: restart
종료: exit, shutdown, stop
시작: start
중단: stop, abort, halt
컴파일: compile
컴파일러: compiler
바이너리: binary
실행 파일: executable
런타임: runtime
타입: type
클래스: class
인터페이스: interface
구조체: struct
# systems
서버: server
클라이언트: client
네트워크: network
패킷: packet
프로토콜: protocol
연결: connection, connect
접속: connect, connection
재접속: reconnect
끊김: disconnect
끊기: disconnect, drop
타임아웃: timeout
재시도: retry
요청: request
응답: response
헤더: header
메시지: message
이벤트: event
대기열: queue
큐: queue
작업: job, task, work
스레드: thread
동시성: concurrency
비동기: async, asynchronous
동기화: sync, synchronization
잠금: lock
메모리: memory
할당: allocation, allocate
성능: performance
속도: speed
최적화: optimization, optimize
벤치마크: benchmark
측정: measure, measurement
프로파일링: profiling, profiler
지표: metric, metrics
메트릭: metric, metrics
모니터링: monitoring
알림: alert, notification
장애: outage, incident, failure
롤백: rollback, roll back
복구: recovery, restore
백업: backup
데이터베이스: database
쿼리: query
테이블: table
스키마: schema
마이그레이션: migration
이전: migration, move, previous
저장: save, store, storage
스토리지: storage
업로드: upload
다운로드: download
캐시: cache
해시: hash
체크섬: checksum
서명: signature, sign
인증서: certificate
인증: authentication, auth
권한: permission
보안: security
암호화: encryption
압축: compression, compress
번들: bundle
에셋: asset
이미지: image
컨테이너: container
클러스터: cluster
인스턴스: instance
부하: load
트래픽: traffic
확장성: scalability, scale
한도: limit, quota
제한: limit, restriction
크기: size
용량: capacity, size
비용: cost
무료: free
유료: paid
로그: log, logs, logging
로깅: logging
디버그: debug
디버깅: debugging
오류: error
에러: error
예외: exception
경고: warning
실패: failure, fail, failed
성공: success
충돌: crash, conflict, collision
크래시: crash
정수: integer
# platforms
윈도우: windows
윈도우즈: windows
맥: mac, macos
리눅스: linux
플랫폼: platform
모바일: mobile
휴대폰: phone, mobile
브라우저: browser
# text, files, web
파일: file
파일명: file name, filename
폴더: folder, directory
디렉터리: directory
디렉토리: directory
경로: path
이름: name
문자: character
문자열: string
단어: word
인코딩: encoding
정규화: normalization
번역: translation, translate
언어: language
한국어: korean
한글: korean, hangul
영어: english
일본어: japanese
검색: search
색인: index
인덱스: index
페이지: page
링크: link
리다이렉트: redirect
주소: address, url
도메인: domain
호스팅: hosting
미리보기: preview
사이드바: sidebar
레이아웃: layout
화면: screen, display
폰트: font
글꼴: font
테마: theme
색상: color, colour
# time and quantity
날짜: date
시간: time, hour, hours
시간대: timezone, time zone
분: minute, minutes
초: second, seconds
주: week
개월: months
기간: period, duration
개수: count, number
# people and preferences
사용자: user
개발자: developer
팀: team
선호: prefer, preference
스타일: style
기능: feature
신규: new
새: new
기존: existing, old
최신: latest
"""


def parse(text: str = GLOSSARY) -> list[tuple[str, tuple[str, ...]]]:
    """Entries as ``(korean, (english alternative, ...))``."""
    entries = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        korean, _, english = line.partition(":")
        alternatives = tuple(part.strip() for part in english.split(",") if part.strip())
        if korean.strip() and alternatives:
            entries.append((korean.strip(), alternatives))
    return entries
