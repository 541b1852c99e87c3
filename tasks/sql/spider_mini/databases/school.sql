CREATE TABLE departments (
  department_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  building TEXT,
  budget REAL
);

CREATE TABLE teachers (
  teacher_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  department_id INTEGER,
  hire_date TEXT,
  salary REAL,
  email TEXT,
  FOREIGN KEY (department_id) REFERENCES departments(department_id)
);

CREATE TABLE courses (
  course_id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  department_id INTEGER,
  teacher_id INTEGER,
  credits INTEGER,
  level TEXT,
  FOREIGN KEY (department_id) REFERENCES departments(department_id),
  FOREIGN KEY (teacher_id) REFERENCES teachers(teacher_id)
);

CREATE TABLE students (
  student_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  birth_date TEXT,
  major_department_id INTEGER,
  gpa REAL,
  enrollment_year INTEGER,
  FOREIGN KEY (major_department_id) REFERENCES departments(department_id)
);

CREATE TABLE enrollments (
  enrollment_id INTEGER PRIMARY KEY,
  student_id INTEGER NOT NULL,
  course_id INTEGER NOT NULL,
  semester TEXT,
  grade REAL,
  FOREIGN KEY (student_id) REFERENCES students(student_id),
  FOREIGN KEY (course_id) REFERENCES courses(course_id)
);

INSERT INTO departments VALUES (1, 'Computer Science', 'Turing Hall', 850000.0);
INSERT INTO departments VALUES (2, 'Mathematics', 'Euler Building', 420000.0);
INSERT INTO departments VALUES (3, 'Physics', 'Curie Center', 610000.5);
INSERT INTO departments VALUES (4, 'History', 'Tacitus Hall', 275000.0);
INSERT INTO departments VALUES (5, 'Biology', 'Darwin Labs', 530000.0);
INSERT INTO departments VALUES (6, 'Philosophy', 'Tacitus Hall', 190000.0);
INSERT INTO departments VALUES (7, 'Music', 'Clara Schumann Hall', NULL);
INSERT INTO departments VALUES (8, 'Economics', 'Euler Building', 380000.0);

INSERT INTO teachers VALUES (1, 'Rebecca Stone', 1, '2010-08-15', 98000.0, 'r.stone@school.edu');
INSERT INTO teachers VALUES (2, 'Anil Kapoor', 1, '2015-01-10', 87500.0, 'a.kapoor@school.edu');
INSERT INTO teachers VALUES (3, 'Marie Dupont', 2, '2008-09-01', 91000.0, NULL);
INSERT INTO teachers VALUES (4, 'George Whitfield', 2, '2019-08-20', 72000.0, 'g.whitfield@school.edu');
INSERT INTO teachers VALUES (5, 'Ling Zhao', 3, '2012-02-14', 89000.0, 'l.zhao@school.edu');
INSERT INTO teachers VALUES (6, 'Patrick O''Neill', 4, '2005-09-05', 83500.0, NULL);
INSERT INTO teachers VALUES (7, 'Sofia Lindqvist', 5, '2017-08-28', 79000.0, 's.lindqvist@school.edu');
INSERT INTO teachers VALUES (8, 'Kwame Asante', 5, '2021-01-04', 68500.0, 'k.asante@school.edu');
INSERT INTO teachers VALUES (9, 'Helen McBride', 6, '2011-09-12', 76000.0, 'h.mcbride@school.edu');
INSERT INTO teachers VALUES (10, 'Tomasz Nowak', 3, '2023-08-21', 65000.0, NULL);
INSERT INTO teachers VALUES (11, 'Daniela Ruiz', 4, '2016-01-18', 74500.0, 'd.ruiz@school.edu');

INSERT INTO courses VALUES (1, 'Introduction to Programming', 1, 1, 4, 'Introductory');
INSERT INTO courses VALUES (2, 'Data Structures', 1, 2, 4, 'Intermediate');
INSERT INTO courses VALUES (3, 'Machine Learning', 1, 1, 3, 'Advanced');
INSERT INTO courses VALUES (4, 'Calculus I', 2, 3, 4, 'Introductory');
INSERT INTO courses VALUES (5, 'Linear Algebra', 2, 4, 3, 'Intermediate');
INSERT INTO courses VALUES (6, 'Number Theory', 2, 3, 3, 'Advanced');
INSERT INTO courses VALUES (7, 'Classical Mechanics', 3, 5, 4, 'Introductory');
INSERT INTO courses VALUES (8, 'Quantum Physics', 3, 5, 4, 'Advanced');
INSERT INTO courses VALUES (9, 'World History', 4, 6, 3, 'Introductory');
INSERT INTO courses VALUES (10, 'The Roman Empire', 4, 11, 3, 'Intermediate');
INSERT INTO courses VALUES (11, 'Cell Biology', 5, 7, 4, 'Introductory');
INSERT INTO courses VALUES (12, 'Genetics', 5, 8, 3, 'Intermediate');
INSERT INTO courses VALUES (13, 'Ethics', 6, 9, 2, 'Introductory');
INSERT INTO courses VALUES (14, 'Astrophysics Seminar', 3, NULL, 2, 'Advanced');
INSERT INTO courses VALUES (15, 'Database Systems', 1, 2, 3, 'Intermediate');

INSERT INTO students VALUES (1, 'Aiden', 'Walsh', '2003-05-14', 1, 3.72, 2021);
INSERT INTO students VALUES (2, 'Bella', 'Okoye', '2004-02-09', 1, 3.45, 2022);
INSERT INTO students VALUES (3, 'Caleb', 'Jensen', '2002-11-30', 2, 3.91, 2020);
INSERT INTO students VALUES (4, 'Diana', 'Petrova', '2003-07-22', 3, 3.2, 2021);
INSERT INTO students VALUES (5, 'Elias', 'Romero', '2004-09-03', 4, 2.85, 2022);
INSERT INTO students VALUES (6, 'Fatima', 'Zahra', '2003-01-17', 5, 3.6, 2021);
INSERT INTO students VALUES (7, 'Gavin', 'Walsh', '2005-03-08', 1, NULL, 2023);
INSERT INTO students VALUES (8, 'Hana', 'Suzuki', '2002-06-25', 2, 3.45, 2020);
INSERT INTO students VALUES (9, 'Ivan', 'Horvat', '2004-12-12', 3, 2.95, 2022);
INSERT INTO students VALUES (10, 'Julia', 'Becker', '2003-10-01', NULL, 3.1, 2021);
INSERT INTO students VALUES (11, 'Kofi', 'Boateng', '2005-04-19', 5, NULL, 2023);
INSERT INTO students VALUES (12, 'Lena', 'Fischer', '2002-08-07', 6, 3.8, 2020);
INSERT INTO students VALUES (13, 'Marco', 'Bianchi', '2004-01-29', 1, 3.05, 2022);
INSERT INTO students VALUES (14, 'Nadia', 'Hassan', '2003-03-15', 4, 3.55, 2021);
INSERT INTO students VALUES (15, 'Oscar', 'Lindgren', '2005-11-11', NULL, NULL, 2023);
INSERT INTO students VALUES (16, 'Priya', 'Sharma', '2004-06-02', 1, 3.98, 2022);
INSERT INTO students VALUES (17, 'Quentin', 'Moreau', '2002-02-20', 3, 2.7, 2020);
INSERT INTO students VALUES (18, 'Rosa', 'Delgado', '2005-08-14', 5, 3.33, 2023);

INSERT INTO enrollments VALUES (1, 1, 1, 'Fall 2023', 91.5);
INSERT INTO enrollments VALUES (2, 1, 2, 'Spring 2024', 88.0);
INSERT INTO enrollments VALUES (3, 1, 4, 'Fall 2023', 79.5);
INSERT INTO enrollments VALUES (4, 2, 1, 'Fall 2023', 84.0);
INSERT INTO enrollments VALUES (5, 2, 15, 'Spring 2024', NULL);
INSERT INTO enrollments VALUES (6, 3, 4, 'Fall 2023', 97.0);
INSERT INTO enrollments VALUES (7, 3, 5, 'Fall 2023', 94.5);
INSERT INTO enrollments VALUES (8, 3, 6, 'Spring 2024', 92.0);
INSERT INTO enrollments VALUES (9, 4, 7, 'Fall 2023', 81.0);
INSERT INTO enrollments VALUES (10, 4, 8, 'Spring 2024', 76.5);
INSERT INTO enrollments VALUES (11, 5, 9, 'Fall 2023', 72.0);
INSERT INTO enrollments VALUES (12, 5, 10, 'Spring 2024', 80.5);
INSERT INTO enrollments VALUES (13, 6, 11, 'Fall 2023', 89.0);
INSERT INTO enrollments VALUES (14, 6, 12, 'Spring 2024', NULL);
INSERT INTO enrollments VALUES (15, 7, 1, 'Spring 2024', NULL);
INSERT INTO enrollments VALUES (16, 8, 4, 'Fall 2023', 90.0);
INSERT INTO enrollments VALUES (17, 8, 5, 'Spring 2024', 86.5);
INSERT INTO enrollments VALUES (18, 9, 7, 'Fall 2023', 68.0);
INSERT INTO enrollments VALUES (19, 9, 4, 'Fall 2023', 74.5);
INSERT INTO enrollments VALUES (20, 10, 9, 'Fall 2023', 83.0);
INSERT INTO enrollments VALUES (21, 10, 13, 'Spring 2024', 87.5);
INSERT INTO enrollments VALUES (22, 11, 11, 'Spring 2024', NULL);
INSERT INTO enrollments VALUES (23, 12, 13, 'Fall 2023', 95.0);
INSERT INTO enrollments VALUES (24, 12, 9, 'Spring 2024', 88.5);
INSERT INTO enrollments VALUES (25, 13, 1, 'Fall 2023', 77.0);
INSERT INTO enrollments VALUES (26, 13, 2, 'Spring 2024', 70.5);
INSERT INTO enrollments VALUES (27, 14, 10, 'Fall 2023', 91.0);
INSERT INTO enrollments VALUES (28, 14, 9, 'Fall 2023', 85.5);
INSERT INTO enrollments VALUES (29, 16, 1, 'Fall 2023', 99.0);
INSERT INTO enrollments VALUES (30, 16, 2, 'Spring 2024', 96.5);
INSERT INTO enrollments VALUES (31, 16, 3, 'Spring 2024', NULL);
INSERT INTO enrollments VALUES (32, 17, 8, 'Fall 2023', 65.5);
INSERT INTO enrollments VALUES (33, 17, 7, 'Fall 2023', 71.0);
INSERT INTO enrollments VALUES (34, 3, 1, 'Spring 2024', 93.0);
INSERT INTO enrollments VALUES (35, 6, 7, 'Spring 2024', 82.5);
INSERT INTO enrollments VALUES (36, 13, 15, 'Spring 2024', 79.0);
